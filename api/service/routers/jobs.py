"""POST /v1/jobs, GET /v1/jobs/{id} (status, progress, result), DELETE (cancel)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse
from ppsched.api.service.deps import State
from ppsched.api.service.errors import NotFound
from ppsched.api.service.gate import CallerDep, may_see
from ppsched.api.service.schemas import (
    EXAMPLE_PROFILE,
    ErrorBody,
    JobList,
    JobView,
    ScheduleRequest,
)
from ppsched.api.service.solving import spec_from_request
from ppsched.api.service.store import JOB_STATUSES, JobRecord
from ppsched.api.service.tenants import Caller, scoped

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

JobStatus = Literal["queued", "running", "done", "failed", "cancelled"]
JobId = Annotated[str, Path(pattern=r"^[0-9a-f]{32}$", description="A job's id.",
                            examples=["9b1f0c2d3e4a5b6c7d8e9f0a1b2c3d4e"])]
_JOB_EXAMPLE = {"summary": "Exact refinement for 30 s",
                "value": {"profile": EXAMPLE_PROFILE, "method": "ilp", "time_limit_s": 30.0}}


@router.post(
    "", status_code=202, response_model=JobView, summary="Submit a solve as a job",
    responses={429: {"model": ErrorBody, "description": "The job queue is full; retry "
                     "after the Retry-After header's seconds."},
               422: {"model": ErrorBody, "description": "Invalid input or over a limit."}},
    openapi_extra={"requestBody": {"content": {"application/json": {
        "examples": {"ilp": _JOB_EXAMPLE}}}}},
)
async def create_job(request: ScheduleRequest, state: State,
                     caller: CallerDep) -> JSONResponse:
    """Queue any schedule request as a job (the same body as POST /v1/schedules). A
    request whose result is stored is done at once; one already queued or running gives
    that job."""
    spec = scoped(spec_from_request(request, state.settings), caller)
    job = state.jobs.submit(spec, caller.owner if caller else None)
    view = job_view(job)
    return JSONResponse(view, status_code=202, headers={"Location": view["links"]["self"]})


@router.get("", response_model=JobList, summary="List jobs",
            responses={422: {"model": ErrorBody, "description": "An unknown status."}})
def list_jobs(state: State, caller: CallerDep,
              status: Annotated[list[JobStatus] | None,
                                Query(description="Only jobs in these statuses.")] = None,
              limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> dict[str, Any]:
    """The newest jobs first: with API keys, the caller's tenant's jobs only; in open
    mode, everyone's."""
    tenant = caller.tenant if caller is not None else None
    jobs = state.store.jobs_of(tenant, tuple(status or JOB_STATUSES), limit)
    return {"jobs": [job_view(job) for job in jobs]}


@router.get("/{job_id}", response_model=JobView, summary="A job's status and progress",
            responses={404: {"model": ErrorBody}})
def get_job(job_id: JobId, state: State, caller: CallerDep) -> dict[str, Any]:
    """Status, the search's progress (best objective, bound, gap), then `schedule_id`."""
    return job_view(_job(state, job_id, caller))


@router.delete("/{job_id}", response_model=JobView, summary="Cancel a job",
               responses={200: {"description": "The job after the cancel: `cancelled` "
                                "(with its best schedule so far, if any), or its final "
                                "status if it had already ended. It stays readable."},
                          404: {"model": ErrorBody}})
async def cancel_job(job_id: JobId, state: State, caller: CallerDep) -> dict[str, Any]:
    """Cancel (DELETE does not delete): stop a queued or running job. A running ilp
    search hands back the best schedule it has found (at worst the heuristic's):
    `schedule_id` names it. The job stays readable at GET /v1/jobs/{id} with status
    `cancelled`; a finished job is returned unchanged, and a repeated DELETE answers the
    same."""
    _job(state, job_id, caller)
    await state.jobs.cancel(job_id)
    return job_view(_job(state, job_id, caller))


def _job(state: State, job_id: str, caller: Caller | None = None) -> JobRecord:
    job = state.store.get_job(job_id)
    # Another tenant's job is answered as one that does not exist: its id tells nothing.
    if job is None or not may_see(caller, job.tenant):
        raise NotFound("job", job_id, "the id of a job this service created")
    return job


def job_view(job: JobRecord) -> dict[str, Any]:
    """A stored job as the JSON of GET /v1/jobs/{id}."""
    links = {"self": f"/v1/jobs/{job.id}"}
    if job.schedule_id:
        links["schedule"] = f"/v1/schedules/{job.schedule_id}"
    return {"id": job.id, "status": job.status, "progress": job.progress,
            "schedule_id": job.schedule_id, "error": job.error,
            "method": job.request.get("method", "?"), "created": job.created,
            "updated": job.updated, "links": links, "attempts": job.attempts}
