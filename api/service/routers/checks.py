"""POST /v1/simulate and POST /v1/validate: time and check a schedule made elsewhere."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Body, Response
from ppsched.api.service.deps import State
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
ScheduleBody = Annotated[dict[str, Any], Body(
    description="A schedule (DESIGN.md section 4); start/end and figures are optional "
    "and recomputed.",
    openapi_examples={"valid": {"summary": "One rank, one microbatch", "value": _EXAMPLE},
                      "invalid": {"summary": "B before its F", "value": _BROKEN}})]
_SCHEMA = {"requestBody": {"content": {"application/json": {"schema": SCHEDULE_REF}}}}


@router.post("/simulate", summary="Re-time a schedule", openapi_extra=_SCHEMA,
             responses={200: {"description": "The re-timed schedule with its id and links",
                              "content": {"application/json": {"schema": {
                                  "$ref": "#/components/schemas/ScheduleResult"}}}},
                        422: {"model": ErrorBody, "description": "Invalid input, or a "
                              "schedule that breaks the contract (every violation listed, "
                              "with the grid)."}})
async def simulate_schedule(schedule: ScheduleBody, state: State) -> Response:
    """Time the orders with the DESIGN.md cost model and store the result (its views are
    then at the returned links). A schedule that breaks the contract is a 422 listing
    every violation."""
    parsed, sim = await _simulate(schedule, state)
    if not sim.ok:
        raise ScheduleInvalid(sim.violations, order_grid(sim.order, sim.violations))
    retimed = schedule_from_simulation(parsed.profile, sim, parsed.method)
    text = retimed.model_dump_json()
    schedule_id = content_id(text)
    body = with_links(text, schedule_id)
    state.store.put_schedule(schedule_id, body)
    return Response(body, media_type="application/json")


@router.post("/validate", summary="Check a schedule", response_model=ValidationReport,
             openapi_extra=_SCHEMA, responses={422: {"model": ErrorBody}})
async def validate_schedule(schedule: ScheduleBody, state: State) -> ValidationReport:
    """Whether the schedule keeps the contract (each op once, on its rank, dependencies,
    memory): its violations (the first PPSCHED_MAX_VIOLATIONS, and their count), the grid
    that marks them, and the figures when valid."""
    _, sim = await _simulate(schedule, state)
    # Listed up to a limit: 1 MB of schedule broken everywhere had 123,902 violations
    # and answered 13 MB. The count is whole.
    listed = sim.violations[:state.settings.max_violations]
    violations = [{"kind": v.kind, "message": v.message, "rank": v.rank,
                   "position": v.position} for v in listed]
    return ValidationReport.model_validate({
        "valid": sim.ok, "violations": violations,
        "violations_total": len(sim.violations),
        "grid": order_grid(sim.order, sim.violations) if sim.violations else None,
        "metrics": ScheduleMetrics.from_metrics(sim.metrics).model_dump(mode="json")
        if sim.ok and sim.metrics is not None else None})


async def _simulate(data: dict[str, Any], state: State) -> tuple[Schedule, Simulation]:
    check_profile_limits(data.get("profile"), state.settings)
    parsed = parse_schedule(data)
    # Simulating 10^4 ops takes tens of ms: off the event loop.
    sim = await asyncio.to_thread(simulate, parsed.problem(), parsed.orders())
    return parsed, sim

