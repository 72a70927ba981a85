"""POST /v1/simulate and POST /v1/validate: time and check a schedule made elsewhere."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from ppsched.api.service.bounded import POOLED_ERRORS, request_body, run_bounded
from ppsched.api.service.config import Settings
from ppsched.api.service.deps import State
from ppsched.api.service.errors import LimitExceeded
from ppsched.api.service.schemas import EXAMPLE_PROFILE, SCHEDULE_REF, ErrorBody, ValidationReport
from ppsched.api.service.solving import check_profile_limits, content_id, with_links
from ppsched.solver.model import (
    Schedule,
    ScheduleInvalid,
    ScheduleMetrics,
    order_grid,
    parse_schedule,
)
from ppsched.solver.sim import Simulation, schedule_from_simulation, simulate

router = APIRouter(prefix="/v1", tags=["checks"])

_ONE_F = [{"kind": "F", "stage": 0, "microbatch": 0}]
_EXAMPLE = {"profile": {**EXAMPLE_PROFILE, "num_ranks": 1, "num_microbatches": 1},
            "method": "by-hand",
            "ranks": [[*_ONE_F, {"kind": "B", "stage": 0, "microbatch": 0},
                       {"kind": "W", "stage": 0, "microbatch": 0}]]}
_BROKEN = {**_EXAMPLE, "ranks": [[{"kind": "B", "stage": 0, "microbatch": 0}, *_ONE_F,
                                  {"kind": "W", "stage": 0, "microbatch": 0}]]}
_DESCRIPTION = "A schedule (DESIGN.md section 4); start/end and figures are optional " \
    "and recomputed."
_VALID = {"summary": "One rank, one microbatch", "value": _EXAMPLE}
_SCHEMA = request_body(None, _DESCRIPTION, {"valid": _VALID})
_SCHEMA["requestBody"]["content"]["application/json"]["schema"] = SCHEDULE_REF
# A broken schedule is validate's example only: /v1/simulate answers it 422, by design.
_CHECK_SCHEMA = request_body(None, _DESCRIPTION, {
    "valid": _VALID, "invalid": {"summary": "B before its F", "value": _BROKEN}})
_CHECK_SCHEMA["requestBody"]["content"]["application/json"]["schema"] = SCHEDULE_REF


_RESPONSES: dict[int | str, dict[str, Any]] = {
    **POOLED_ERRORS,
    422: {"model": ErrorBody, "description": "Invalid input, over a size limit (the field, "
          "the value and the PPSCHED_ setting are named), past the time budget "
          "(PPSCHED_CALL_TIME_BUDGET_S), or a schedule that breaks the contract (every "
          "violation listed, with the grid)."}}


@router.post("/simulate", summary="Re-time a schedule", openapi_extra=_SCHEMA,
             responses={200: {"description": "The re-timed schedule with its id and links",
                              "content": {"application/json": {"schema": {
                                  "$ref": "#/components/schemas/ScheduleResult"}}}},
                        **_RESPONSES})
async def simulate_schedule(http: Request, state: State) -> Response:
    """Time the orders with the DESIGN.md cost model and store the result (its views are
    then at the returned links). A schedule that breaks the contract is a 422 listing
    every violation. Parsed and simulated in the worker pool, within PPSCHED_MAX_CHECK_OPS
    and PPSCHED_CALL_TIME_BUDGET_S."""
    return await run_bounded(http, state, simulate_json)


@router.post("/validate", summary="Check a schedule", response_model=ValidationReport,
             openapi_extra=_CHECK_SCHEMA, responses=_RESPONSES)
async def validate_schedule(http: Request, state: State) -> Response:
    """Whether the schedule keeps the contract (each op once, on its rank, dependencies,
    memory): its violations (the first PPSCHED_MAX_VIOLATIONS, and their count), the grid
    that marks them, and the figures when valid. Parsed and simulated in the worker pool,
    within PPSCHED_MAX_CHECK_OPS and PPSCHED_CALL_TIME_BUDGET_S."""
    return await run_bounded(http, state, validate_json)


def simulate_json(data: Any, limits: Settings) -> tuple[str, str]:
    """In a worker: the re-timed schedule's stored body and its content id.

    Raises:
        ScheduleInvalid: the schedule breaks the contract.
        ProfileError: a bad field, or one over the service's limits.
    """
    parsed, sim = _simulate(data, limits)
    if not sim.ok:
        raise ScheduleInvalid(sim.violations, order_grid(sim.order, sim.violations))
    retimed = schedule_from_simulation(parsed.profile, sim, parsed.method)
    text = retimed.model_dump_json()
    schedule_id = content_id(text)
    return with_links(text, schedule_id), schedule_id


def validate_json(data: Any, limits: Settings) -> str:
    """In a worker: the validation report's JSON."""
    _, sim = _simulate(data, limits)
    # Listed up to a limit: 1 MB of schedule broken everywhere had 123,902 violations
    # and answered 13 MB. The count is whole.
    listed = sim.violations[:limits.max_violations]
    violations = [{"kind": v.kind, "message": v.message, "rank": v.rank,
                   "position": v.position} for v in listed]
    return ValidationReport.model_validate({
        "valid": sim.ok, "violations": violations,
        "violations_total": len(sim.violations),
        "grid": order_grid(sim.order, sim.violations) if sim.violations else None,
        "metrics": ScheduleMetrics.from_metrics(sim.metrics).model_dump(mode="json")
        if sim.ok and sim.metrics is not None else None}).model_dump_json()


def _simulate(data: Any, limits: Settings) -> tuple[Schedule, Simulation]:
    if isinstance(data, dict):
        check_profile_limits(data.get("profile"), limits)
        ranks = data.get("ranks")
        if isinstance(ranks, list):
            # Counted before the ops become objects (the costly part of parsing).
            ops = sum(len(rank) if isinstance(rank, list) else rank.count(",") + 1
                      for rank in ranks if isinstance(rank, list | str) and rank)
            if ops > limits.max_check_ops:
                raise LimitExceeded("ranks", f"{ops} ops", limits.max_check_ops,
                                    "max_check_ops")
    parsed = parse_schedule(data)
    return parsed, simulate(parsed.problem(), parsed.orders())
