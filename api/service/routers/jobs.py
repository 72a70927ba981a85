"""POST /v1/jobs, GET /v1/jobs/{id} (status, progress, result), DELETE (cancel)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse
from ppsched.api.service.deps import State
from ppsched.api.service.errors import NotFound
from ppsched.api.service.schemas import EXAMPLE_PROFILE, ErrorBody, JobView, ScheduleRequest
from ppsched.api.service.solving import spec_from_request
from ppsched.api.service.store import JobRecord

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

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
async def create_job(request: ScheduleRequest, state: State) -> JSONResponse:
    """Queue any schedule request as a job (the same body as POST /v1/schedules). A
    request whose result is stored is done at once; one already queued or running gives
    that job."""
    spec = spec_from_request(request, state.settings)
    job = state.jobs.submit(spec)
    view = job_view(job)
    return JSONResponse(view, status_code=202, headers={"Location": view["links"]["self"]})


@router.get("/{job_id}", response_model=JobView, summary="A job's status and progress",
            responses={404: {"model": ErrorBody}})
def get_job(job_id: JobId, state: State) -> dict[str, Any]:
    """Status, the search's progress (best objective, bound, gap), then `schedule_id`."""
    return job_view(_job(state, job_id))


@router.delete("/{job_id}", response_model=JobView, summary="Cancel a job",
               responses={200: {"description": "The job after the cancel: `cancelled` "
                                "(with its best schedule so far, if any), or its final "
                                "status if it had already ended. It stays readable."},
                          404: {"model": ErrorBody}})
async def cancel_job(job_id: JobId, state: State) -> dict[str, Any]:
    """Cancel (DELETE does not delete): stop a queued or running job. A running ilp
    search hands back the best schedule it has found (at worst the heuristic's):
    `schedule_id` names it. The job stays readable at GET /v1/jobs/{id} with status
    `cancelled`; a finished job is returned unchanged, and a repeated DELETE answers the
    same."""
    _job(state, job_id)
    await state.jobs.cancel(job_id)
    return job_view(_job(state, job_id))


def _job(state: State, job_id: str) -> JobRecord:
    job = state.store.get_job(job_id)
    if job is None:
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
            "updated": job.updated, "links": links}
