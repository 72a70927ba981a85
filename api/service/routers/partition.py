"""POST /v1/partition: a per-layer profile (DESIGN.md 6.7) cut into one stage per rank
jointly with the schedule (`ppsched partition`): the best cut's schedule, the cuts
compared and the torchtitan setting that runs it."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request, Response
from ppsched.api.partition_record import partition_record, torchtitan_recipe
from ppsched.api.service.bounded import (
    POOLED_ERRORS,
    parse_request,
    request_body,
    run_bounded,
)
from ppsched.api.service.config import Settings
from ppsched.api.service.deps import State
from ppsched.api.service.solving import check_profile_limits
from ppsched.solver.model import LayerProfile, ProfileError, parse_layers
from ppsched.solver.partition import partition
from pydantic import BaseModel, ConfigDict, Field

router = APIRouter(prefix="/v1", tags=["partition"])

_EXAMPLE = {"layers": {
    "name": "four-blocks-and-a-head", "num_ranks": 2, "num_microbatches": 4, "t_comm": 0.05,
    "layers": [
        {"name": "embed", "t_f": 0.1, "t_b": 0.0, "t_w": 0.1, "m_b": 0.01, "m_w": 0.01},
        *({"name": f"layers.{i}", "t_f": 1.0, "t_b": 1.1, "t_w": 0.9, "m_b": 1.0,
           "m_w": 0.4} for i in range(4)),
        {"name": "output", "t_f": 2.0, "t_b": 2.0, "t_w": 2.0, "m_b": 1.5, "m_w": 0.5}]}}


class PartitionRequest(BaseModel):
    """The per-layer profile and what to change in it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    layers: dict[str, Any] = Field(description="A per-layer profile (DESIGN.md 6.7): "
                                   "num_ranks, num_microbatches, t_comm, memory_limit "
                                   "and its layers (name, t_f, t_b, t_w, m_b, m_w).")
    memory_limit: float | None = Field(None, gt=0, description="Overrides the profile's "
                                       "memory_limit (absent: the profile's own).")
    num_microbatches: int | None = Field(None, ge=1, description="Overrides the profile's "
                                         "num_microbatches.")
    candidates: int = Field(256, ge=1, le=4096, description="Cuts the heuristic judges at "
                            "most, in order of their bound, besides the even split, "
                            "torchtitan's and Megatron's (as `--candidates`).")


class PartitionResponse(BaseModel):
    """The best cut's schedule and how it was found."""

    model_config = ConfigDict(extra="forbid")

    schedule: dict[str, Any] = Field(description="The best cut's schedule JSON (DESIGN.md "
                                     "section 4): its profile is the cut profile, with "
                                     "layers_per_stage and each stage's layer names.")
    partition: dict[str, Any] = Field(description="The search: lower_bound and its "
                                      "bound_scope, proven (the cut is the best under the "
                                      "heuristic over every cut), judged, and the cuts "
                                      "compared (even split, torchtitan's, Megatron's, "
                                      "ppsched's) with step time and peak memory.")
    torchtitan: dict[str, Any] = Field(description="torchtitan's [parallelism] settings: "
                                       "module_fqns_per_model_part and "
                                       "pipeline_parallel_degree.")


def _layers(request: PartitionRequest, limits: Settings) -> LayerProfile:
    """The per-layer profile with the request's changes, within the service's limits;
    its errors name the field under ``layers.``."""
    data = dict(request.layers)
    if request.memory_limit is not None:
        data["memory_limit"] = request.memory_limit
    if request.num_microbatches is not None:
        data["num_microbatches"] = request.num_microbatches
    check_profile_limits(data, limits, prefix="layers")
    count = data.get("layers")
    if isinstance(count, list) and len(count) > limits.max_partition_layers:
        raise ProfileError("layers.layers", f"{len(count)} layers",
                           f"at most {limits.max_partition_layers} in the service "
                           "(PPSCHED_MAX_PARTITION_LAYERS; the CLI has no limit)")
    try:
        return parse_layers(data)
    except ProfileError as exc:
        raise ProfileError(f"layers.{exc.field}", exc.value, exc.accepted) from None


def partition_json(data: Any, limits: Settings) -> str:
    """A parsed request cut, as the response's JSON: runs in a worker process (the
    search judges up to `candidates` cuts with the heuristic).

    Raises:
        ProfileError: a bad field, one over the service's limits, or a memory limit no
            cut fits.
    """
    request = parse_request(PartitionRequest, data, "layers (and memory_limit, "
                            "num_microbatches, candidates)")
    layers = _layers(request, limits)
    try:
        found = partition(layers, budget=request.candidates)
    except ProfileError as exc:  # no cut fits the limit: the body's, or the profile's
        if exc.field != "memory_limit" or request.memory_limit is not None:
            raise
        raise ProfileError("layers.memory_limit", exc.value, exc.accepted) from None
    schedule = found.best.schedule
    assert schedule is not None  # the best judged cut fits (partition raises otherwise)
    return PartitionResponse(schedule=json.loads(schedule.model_dump_json()),
                             partition=partition_record(found),
                             torchtitan=torchtitan_recipe(schedule)).model_dump_json()


@router.post("/partition", response_model=PartitionResponse,
             summary="Cut a per-layer profile into stages", responses=POOLED_ERRORS,
             openapi_extra=request_body(
                 PartitionRequest, "A per-layer profile and what to change in it (as "
                 "`ppsched partition LAYERS.json`)", {"a-head-heavier-than-blocks": {
                     "value": _EXAMPLE}}))
async def post_partition(http: Request, state: State) -> Response:
    """The cut of the layers into one stage per rank with the shortest heuristic step
    time (a dynamic program's bound rules out the cuts not judged), in the worker pool
    within PPSCHED_MAX_PARTITION_LAYERS, the p and m limits and
    PPSCHED_CALL_TIME_BUDGET_S; a bad field is a 422 naming it, the value and what is
    accepted."""
    return await run_bounded(http, state, partition_json)
