"""POST /v1/schedules (solve, or queue as a job), GET /v1/schedules/{id} and its views."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import JSONResponse
from ppsched.api.service.answer_memo import ANSWER_KEY
from ppsched.api.service.deps import ServiceState, State
from ppsched.api.service.errors import NotFound
from ppsched.api.service.flight import unless_disconnected
from ppsched.api.service.gate import CallerDep
from ppsched.api.service.schemas import (
    EXAMPLE_PROFILE,
    ErrorBody,
    JobAccepted,
    ScheduleRequest,
    ScheduleResult,
)
from ppsched.api.service.solving import SolveSpec, is_synchronous, spec_and_profile
from ppsched.api.service.tenants import scoped
from ppsched.api.service.worker import render_view, solve_body
from ppsched.solver.model import ProfileError, SolverError, shape_warnings
from ppsched.solver.render import note_of_counts
from starlette.types import Receive

router = APIRouter(prefix="/v1/schedules", tags=["schedules"])

ID_PATTERN = r"^[0-9a-z]{1,64}$"
ScheduleId = Annotated[str, Path(pattern=ID_PATTERN, description="A schedule's id.",
                                 examples=["3f2c9a0e5b7d41c6a8e9f0b1c2d3e4f5"])]
ERRORS: dict[int | str, dict[str, Any]] = {
    422: {"model": ErrorBody, "description": "Invalid input or over a limit (the field, "
          "the value and what is accepted are named)."},
}
_REQUEST_EXAMPLES = {
    "heuristic": {"summary": "Zero Bubble heuristic (fast, synchronous)",
                  "value": {"profile": EXAMPLE_PROFILE, "method": "heuristic"}},
    "named": {"summary": "A named schedule",
              "value": {"profile": EXAMPLE_PROFILE, "method": "zb-h1"}},
    "ilp": {"summary": "Exact refinement with a proven bound",
            "value": {"profile": EXAMPLE_PROFILE, "method": "ilp", "time_limit_s": 2.0}},
    "memory": {"summary": "Override the memory limit",
               "value": {"profile": EXAMPLE_PROFILE, "memory_limit": 6.0}},
}


@router.post(
    "", summary="Solve a profile", response_model=ScheduleResult,
    responses={
        200: {"description": "The schedule (DESIGN.md section 4) with its id and links.",
              "headers": {"X-Ppsched-Warning": {
                  "description": "Present when the profile's shape solves but is rarely "
                  "meant (fewer microbatches than ranks): the warnings, '; '-separated.",
                  "schema": {"type": "string"}}}},
        202: {"model": JobAccepted, "description": "A request over the synchronous "
              "budget (ops over PPSCHED_MAX_SYNC_OPS, or an ilp time limit over the "
              "ceiling) became a job: poll the Location header."},
        503: {"model": ErrorBody, "description": "Every solver worker busy; retry after "
              "the Retry-After header's seconds."},
        **ERRORS,
    },
    openapi_extra={"requestBody": {"content": {"application/json": {
        "examples": _REQUEST_EXAMPLES}}}},
)
async def create_schedule(request: ScheduleRequest, state: State, http: Request,
                          caller: CallerDep) -> Response:
    """Solve `profile` with `method`. A repeated request is answered from the store; a
    request over the synchronous budget (more ops than PPSCHED_MAX_SYNC_OPS, or an ilp
    time limit over the ceiling) becomes a job (202, Location: /v1/jobs/{id})."""
    # On a SQLite file, `schedule_fast_path` answers in a worker what this route would
    # answer 200, before it runs: the route answers the rest (invalid requests, jobs,
    # the solver's refusals) and every request on PostgreSQL. Keep the two alike.
    spec, profile = spec_and_profile(request, state.settings)  # the profile parsed once
    # With API keys, ids are the tenant's own (tenants.ScopedSpec).
    spec = scoped(spec, caller)
    # A shape that solves but is rarely meant (m < p): said beside the schedule, whose
    # JSON stays DESIGN.md's, stored or fresh.
    warnings = shape_warnings(profile)
    warned = {WARNING_HEADER: "; ".join(warnings)} if warnings else {}
    # What these bytes answer, for the next identical request (`answer_memo`).
    setattr(http.state, ANSWER_KEY, (spec.key, warned.get(WARNING_HEADER)))
    stored = state.store.get_schedule(spec.key)
    if stored is not None:
        state.metrics.cache_hits.inc()
        return Response(stored, media_type="application/json",
                        headers={"X-Cache": "hit", **warned})
    state.metrics.cache_misses.inc()
    if not is_synchronous(spec, state.settings):
        job = state.jobs.submit(spec, caller.owner if caller else None)
        link = f"/v1/jobs/{job.id}"
        body = {"id": job.id, "status": job.status, "links": {"self": link}}
        return JSONResponse(body, status_code=202, headers={"Location": link, **warned})
    body_text = await solve_now(state, spec, http.receive)
    return Response(body_text, media_type="application/json",
                    headers={"X-Cache": "miss", **warned})


async def solve_now(state: ServiceState, spec: SolveSpec, receive: Receive) -> str:
    """Solve in the worker pool (identical concurrent requests share one solve), store
    the result under the request's key, count it; unless the client (whose ASGI
    `receive` this is) goes away first (`ClientGone`). The worker returns the final
    body: the event loop only moves its bytes."""
    return await state.flights.run(spec.key, lambda: _solve_and_store(state, spec),
                                   receive)


async def _solve_and_store(state: ServiceState, spec: SolveSpec) -> str:
    # The time budget: the search's own limit, plus the budget for the rest of the call.
    budget = state.settings.call_time_budget_s + spec.time_limit_s
    outcome, payload, status, stored = await state.pool.run(
        solve_body, spec.to_dict(), spec.key, state.settings.cpsat_workers,
        state.store.shared_path, timeout_s=budget)
    if outcome == "profile_error":
        state.metrics.solves.labels(spec.method, "rejected").inc()
        field, value, accepted = payload
        raise ProfileError(field, value, accepted)
    if outcome != "ok":
        state.metrics.solves.labels(spec.method, "error").inc()
        raise SolverError(f"the solver made an invalid schedule (a bug): {payload}")
    if not stored:  # a SQLite file is written by the worker (`solve_body`)
        await asyncio.to_thread(state.store.put_schedule, spec.key, payload)
    state.metrics.solves.labels(spec.method, status).inc()
    return str(payload)


@router.get("/{schedule_id}.svg", summary="The schedule as an SVG Gantt chart",
            response_class=Response,
            responses={200: {"content": {"image/svg+xml": {}}}, 404: {"model": ErrorBody}})
async def schedule_svg(schedule_id: ScheduleId, state: State, http: Request) -> Response:
    """One row per rank, one box per op, coloured by kind."""
    text = await unless_disconnected(http, _view(state, schedule_id, "svg"))
    return Response(text, media_type="image/svg+xml")


@router.get("/{schedule_id}.csv", summary="The schedule as torch.distributed.pipelining CSV",
            response_class=Response,
            responses={200: {"content": {"text/csv": {"example": "0F0,0F1,0I0,0W0\n"}}},
                       404: {"model": ErrorBody}})
async def schedule_csv(schedule_id: ScheduleId, state: State, http: Request) -> Response:
    """One line per rank (`0F3`; our B written I, our BW written B), as torch's
    `_load_csv` reads it. R, O and L ops (DESIGN.md 6.3) have no torch action: they are
    left out, and the X-Ppsched-Csv-Dropped header says how many."""
    text = await unless_disconnected(http, _view(state, schedule_id, "csv"))
    note = await asyncio.to_thread(_csv_dropped_note, state, schedule_id)
    headers = {DROPPED_HEADER: note} if note else None
    return Response(text, media_type="text/csv", headers=headers)


# DESIGN.md 6.3: torch's CSV has no R, O or L; this header says what the CSV left out.
DROPPED_HEADER = "X-Ppsched-Csv-Dropped"
# POST /v1/schedules: the profile's shape warnings (`shape_warnings`), "; "-separated.
WARNING_HEADER = "X-Ppsched-Warning"
_POLICY_KIND = re.compile(r'"kind":\s*"([ROL])"')


def _csv_dropped_note(state: ServiceState, schedule_id: str) -> str | None:
    # The stored body is the service's own compact JSON: counting the R/O/L kinds in its
    # text spares parsing 10^5 ops on the event loop's thread pool.
    counts = Counter(_POLICY_KIND.findall(_stored(state, schedule_id)))
    return note_of_counts(counts)


@router.get("/{schedule_id}/trace", summary="The schedule as a Chrome/Perfetto trace",
            responses={200: {"content": {"application/json": {}}}, 404: {"model": ErrorBody}})
async def schedule_trace(schedule_id: ScheduleId, state: State, http: Request) -> Response:
    """One track per rank with the ops' real durations (open in ui.perfetto.dev)."""
    text = await unless_disconnected(http, _view(state, schedule_id, "trace"))
    return Response(text, media_type="application/json")


@router.get("/{schedule_id}", summary="A stored schedule", response_model=ScheduleResult,
            responses={404: {"model": ErrorBody}, **ERRORS})
async def get_schedule(schedule_id: ScheduleId, state: State) -> Response:
    """The same body POST /v1/schedules answered (results are content-addressed)."""
    return Response(_stored(state, schedule_id), media_type="application/json")


def _stored(state: ServiceState, schedule_id: str) -> str:
    body = state.store.get_schedule(schedule_id)
    if body is None:
        raise NotFound("schedule", schedule_id, "the id of a schedule this service returned")
    return body


async def _view(state: ServiceState, schedule_id: str, kind: str) -> str:
    """A view drawn once, in a worker process, and kept in the store beside its schedule
    (id ``<schedule id>.<kind>``, which no schedule id can be); concurrent requests for
    it share the drawing."""
    view_id = f"{schedule_id}.{kind}"
    cached = await asyncio.to_thread(state.store.get_schedule, view_id)
    if cached is not None:
        return cached

    async def draw() -> str:
        body = await asyncio.to_thread(_stored, state, schedule_id)
        text = await state.pool.run(render_view, body, kind,
                                    timeout_s=state.settings.call_time_budget_s)
        await asyncio.to_thread(state.store.put_schedule, view_id, text)
        return text

    return await state.flights.run(view_id, draw)
