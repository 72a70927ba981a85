"""POST /v1/advise: rank the strategies for one model on one cluster (`ppsched advise`)."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from ppsched.api.service.bounded import POOLED_ERRORS, request_body, run_bounded
from ppsched.api.service.config import Settings
from ppsched.api.service.deps import State
from ppsched.solver.advisor import (
    AdvisorConfig,
    advise,
    format_table,
    list_assumptions,
    parse_advisor_config,
    probe_sensitivity,
    winner,
)
from ppsched.solver.model import ProfileError
from pydantic import BaseModel, ConfigDict, Field

router = APIRouter(prefix="/v1", tags=["advise"])

_EXAMPLE = {"model": {"layers": 32, "hidden": 4096, "heads": 32, "seq_len": 16384,
                      "microbatch_size": 4, "vocab": 32000},
            "cluster": {"num_gpus": 16, "gpus_per_node": 8, "gpu_tflops": 312,
                        "gpu_memory_gb": 80, "intra_node_gbps": 200,
                        "inter_node_gbps": 1.25},
            "num_microbatches": 64}


class AdviseCandidate(BaseModel):
    """One strategy's predicted step (null figures: not applicable, see `note`)."""

    model_config = ConfigDict(extra="forbid")

    strategy: str
    step_time_s: float | None
    tokens_per_s_per_gpu: float | None
    peak_memory_gb: float | None
    fits: bool
    bubble_rate: float | None
    comm_gb_per_gpu: float | None
    note: str


class AdviseAssumption(BaseModel):
    """One value the answer rests on, and where it came from."""

    model_config = ConfigDict(extra="forbid")

    field: str = Field(description="The config field (dotted), settable in the body.")
    value: Any
    source: str = Field(description="'config' (the body set it) or 'default'.")
    description: str


class AdviseResponse(BaseModel):
    """The ranking, best first (what fits, by step time), the CLI's table, every
    assumption, and (with ?sensitivity=true) whether each assumption flips the pick."""

    model_config = ConfigDict(extra="forbid")

    ranked: list[AdviseCandidate]
    winner: str | None = Field(description="The pick: the fastest strategy that fits "
                               "(null: none fits).")
    table: str = Field(description="The table `ppsched advise` prints.")
    assumptions: list[AdviseAssumption]
    sensitivity: dict[str, Any] | None = Field(
        None, description="Each assumption moved over a range: its sides' ends, the "
        "winner there and the value where the pick flips (as `ppsched advise --json`); "
        "at most PPSCHED_MAX_ADVISE_SENSITIVITY_RUNS advisor reruns (24 by default), "
        "`complete` false when the cap left some out. Null unless asked for.")


def advise_json(data: Any, limits: Settings, sensitivity: bool = False) -> str:
    """A parsed config ranked, as the response's JSON: runs in a worker process (one
    config at the limits took 8.8-11.4 s of CPU).

    Raises:
        ProfileError: a bad field, or one over the service's limits.
    """
    if not isinstance(data, dict):
        raise ProfileError("body", data, "a JSON object: the advisor's config (model, "
                           "cluster, num_microbatches)")
    parsed: AdvisorConfig = parse_advisor_config(data)
    for field, value, setting in (
            ("cluster.num_gpus", parsed.cluster.num_gpus, "max_advise_gpus"),
            ("num_microbatches", parsed.num_microbatches, "max_advise_microbatches"),
            ("model.layers", parsed.model.layers, "max_advise_layers")):
        limit = getattr(limits, setting)
        if value > limit:
            raise ProfileError(field, value, f"at most {limit} in the service "
                               f"(PPSCHED_{setting.upper()}; the CLI has no limit)")
    ranked = advise(parsed)
    report = (probe_sensitivity(data, ranked, limits.max_advise_sensitivity_runs,
                                {"num_microbatches": limits.max_advise_microbatches})
              if sensitivity else None)
    return AdviseResponse(ranked=[AdviseCandidate(**c.to_dict()) for c in ranked],
                          winner=winner(ranked), table=format_table(parsed, ranked),
                          assumptions=[AdviseAssumption(**a.to_dict())
                                       for a in list_assumptions(parsed)],
                          sensitivity=report.to_dict() if report else None,
                          ).model_dump_json()


@router.post("/advise", response_model=AdviseResponse, summary="Rank training strategies",
             responses=POOLED_ERRORS, openapi_extra=request_body(
                 AdvisorConfig, "The advisor's config: model, cluster, num_microbatches (as "
                 "in `ppsched advise MODEL.yaml`)", {"llama-16gpu": {"value": _EXAMPLE}}))
async def post_advise(
        http: Request, state: State,
        sensitivity: Annotated[bool, Query(
            description="Also check whether each assumption flips the pick "
            "(at most PPSCHED_MAX_ADVISE_SENSITIVITY_RUNS advisor reruns).")] = False,
) -> Response:
    """Every strategy's step time, throughput and peak memory from the model's dimensions,
    in the worker pool within the size limits (PPSCHED_MAX_ADVISE_*) and
    PPSCHED_CALL_TIME_BUDGET_S; a bad field is a 422 naming it, the value and what is
    accepted."""
    return await run_bounded(http, state, partial(advise_json, sensitivity=sensitivity))
