"""POST /v1/pack: samples into microbatches and data-parallel replicas, each replica solved,
beside naive packing (`ppsched pack`; DESIGN.md 6.2)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request, Response
from ppsched.api.service.bounded import (
    POOLED_ERRORS,
    parse_request,
    request_body,
    run_bounded,
)
from ppsched.api.service.config import Settings
from ppsched.api.service.deps import State
from ppsched.api.service.solving import check_profile_limits
from ppsched.solver.model import Profile, ProfileError, parse_profile
from ppsched.solver.packing import (
    CostModel,
    PackSpec,
    Quadratic,
    fill_in_order,
    fit_quadratic,
    pack,
)
from ppsched.solver.solving import ILP
from pydantic import BaseModel, ConfigDict, Field

router = APIRouter(prefix="/v1", tags=["pack"])

_EXAMPLE = {
    "lengths": [900, 4000, 1200, 300, 7000, 2500, 800, 1600, 3000, 500, 650, 2200],
    "cap": 8192, "replicas": 2, "microbatches": 4, "cost": {"a": 0.0001, "b": 1.0, "c": 1.0},
    "profile": {"num_ranks": 4, "num_microbatches": 4, "t_f": 1.0, "t_b": 1.0, "t_w": 1.0,
                "m_b": 1.0, "m_w": 1.0}}



class Coefficients(BaseModel):
    """``time(s) = a*s^2 + b*s`` (and memory ``c*s``) of a sample of ``s`` tokens."""

    model_config = ConfigDict(extra="forbid", strict=True)

    a: float = 0.0
    b: float = 1.0
    c: float = 1.0


class PackRequest(BaseModel):
    """The samples, the cap, the replicas, the cost model, the base profile."""

    model_config = ConfigDict(extra="forbid", strict=True)

    lengths: list[Annotated[int, Field(ge=1)]] = Field(
        min_length=1, description="Each sample's tokens, in arrival order.")
    cap: int = Field(ge=1, description="Most tokens per microbatch.")
    replicas: int = Field(1, ge=1, description="Data-parallel replicas.")
    microbatches: int | list[int] | None = Field(
        None, description="Microbatches per replica: one count or one per replica; null: "
        "as many as naive packing needs, spread evenly.")
    profile: dict[str, Any] = Field(description="Base profile (DESIGN.md section 2): its "
                                    "per-stage values are those of one sample of "
                                    "reference_tokens tokens.")
    cost: Coefficients | None = Field(None, description="F's a, b and memory's c "
                                      "(default a=0, b=1, c=1).")
    cost_b: Coefficients | None = Field(None, description="B's own a, b (default: as F).")
    cost_w: Coefficients | None = Field(None, description="W's own a, b (default: as F).")
    fit: list[Annotated[list[float], Field(min_length=2, max_length=2)]] | None = Field(
        None, description="Profiled [tokens, time] points: F's a, b by least squares.")
    reference_tokens: int | None = Field(None, ge=1, description="Default: the cap.")
    method: str = "heuristic"
    naive_method: str | None = None


class PackResponse(BaseModel):
    """Both packings (assignment, per-replica cost and order, step time) and the
    speed-up."""

    model_config = ConfigDict(extra="forbid")

    num_samples: int
    tokens: int
    cap: int
    num_replicas: int
    reference_tokens: int
    packed: dict[str, Any]
    naive: dict[str, Any]
    speedup: float | None = Field(description="Naive step time over ppsched's (null: "
                                  "ppsched's is 0 and naive's is not).")


def spec_from_request(request: PackRequest, limits: Settings) -> PackSpec:
    """The request as a PackSpec (named errors, the service's limits applied)."""
    if len(request.lengths) > limits.max_pack_samples:
        raise ProfileError("lengths", f"{len(request.lengths)} samples",
                           _at_most(limits.max_pack_samples, "max_pack_samples"))
    if request.replicas > limits.max_pack_replicas:
        raise ProfileError("replicas", request.replicas,
                           _at_most(limits.max_pack_replicas, "max_pack_replicas"))
    if request.method == ILP or request.naive_method == ILP:
        field = "method" if request.method == ILP else "naive_method"
        raise ProfileError(field, ILP, "a heuristic or named schedule (ilp runs for seconds "
                           "per replica: use `ppsched pack` or a job)")
    cost = request.cost or Coefficients()
    forward = Quadratic(cost.a, cost.b)
    if request.fit is not None:
        for i, point in enumerate(request.fit):
            if len(point) != 2:
                raise ProfileError(f"fit[{i}]", point, "a pair [tokens, time]")
        forward = fit_quadratic([(s, t) for s, t in request.fit], "fit")
    counts = request.microbatches
    spec = PackSpec(
        lengths=tuple(request.lengths), cap=request.cap, num_replicas=request.replicas,
        microbatches=None if counts is None else
        (counts,) if isinstance(counts, int) else tuple(counts),
        cost=CostModel(forward=forward, memory_per_token=cost.c,
                       backward=Quadratic(request.cost_b.a, request.cost_b.b)
                       if request.cost_b else None,
                       weight=Quadratic(request.cost_w.a, request.cost_w.b)
                       if request.cost_w else None),
        reference_tokens=request.reference_tokens, method=request.method,
        naive_method=request.naive_method)
    return spec


def _at_most(limit: int, setting: str) -> str:
    return f"at most {limit} in the service (PPSCHED_{setting.upper()}; the CLI has no limit)"


def check_size(base: Profile, spec: PackSpec, limits: Settings) -> None:
    """The service's limits on the work of one request (the CLI has none)."""
    stages = base.num_ranks * base.num_chunks
    if stages > limits.max_pack_stages:
        raise ProfileError("profile.num_ranks", base.num_ranks, f"num_ranks * num_chunks <= "
                           f"{limits.max_pack_stages} in the service (PPSCHED_MAX_PACK_STAGES;"
                           " the CLI has no limit)")
    naive = len(fill_in_order(spec.lengths, spec.cap))
    ops = 3 * stages * (sum(spec.counts()) + naive)
    if ops > limits.max_pack_ops:
        raise ProfileError("microbatches", sum(spec.counts()),
                           f"3 * stages * microbatches (both packings) <= "
                           f"{limits.max_pack_ops} in the service (PPSCHED_MAX_PACK_OPS); "
                           f"this request has {ops} (the CLI has no limit)")


def _base_profile(data: dict[str, Any]) -> Profile:
    """The base profile; its errors name the field under ``profile.``."""
    try:
        return parse_profile(data)
    except ProfileError as exc:
        raise ProfileError(f"profile.{exc.field}", exc.value, exc.accepted) from None


def pack_json(data: Any, limits: Settings) -> str:
    """A parsed request body packed, as the response's JSON: runs in a worker process
    (the packing and its replicas' solves take seconds to minutes of CPU).

    Raises:
        ProfileError: a bad field, or one over the service's limits.
    """
    request = parse_request(PackRequest, data, "lengths, cap, profile (and replicas, "
                            "microbatches, cost, ...)")
    check_profile_limits(request.profile, limits)  # before it is resolved (p, m, v)
    base = _base_profile(request.profile)
    spec = spec_from_request(request, limits)
    check_size(base, spec, limits)
    return PackResponse(**pack(base, spec).to_dict()).model_dump_json()


@router.post("/pack", response_model=PackResponse, summary="Pack samples into replicas",
             responses=POOLED_ERRORS, openapi_extra=request_body(
                 PackRequest, "Sample lengths, token cap, replicas, cost model and base "
                 "profile (as `ppsched pack`)", {"four-replicas": {"value": _EXAMPLE}}))
async def post_pack(http: Request, state: State) -> Response:
    """ppsched's packing and naive packing, each replica solved, in the worker pool
    within the size limits (PPSCHED_MAX_PACK_*) and PPSCHED_CALL_TIME_BUDGET_S; a bad
    field is a 422 naming it, the value and what is accepted."""
    return await run_bounded(http, state, pack_json)
