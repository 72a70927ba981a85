"""GET /healthz (the process answers), /readyz (it can take work), /metrics (Prometheus)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from ppsched.api.service.deps import State
from ppsched.api.service.schemas import Health

log = logging.getLogger(__name__)
router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, summary="Liveness")
def healthz() -> Health:
    """200 while the process answers."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, summary="Readiness",
            responses={503: {"model": Health, "description": "Not ready."}})
def readyz(state: State) -> Response:
    """200 when the store, the solver pool and the job runners are up; 503 otherwise."""
    checks = {"store": _store_ok(state), "pool": state.pool.ready, "jobs": state.jobs.ready}
    ready = state.started and all(checks.values())
    body = Health(status="ok" if ready else "not ready", checks=checks)
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)


@router.get("/metrics", summary="Prometheus metrics", response_class=Response,
            responses={200: {"content": {"text/plain": {"example": "ppsched_cache_hits_total "
                                                        "3.0\n"}}}})
def metrics(state: State) -> Response:
    """Requests, latencies, solves by method and status, queue depth, cache hits."""
    state.metrics.queue_depth.labels("solve").set(state.pool.waiting)
    state.metrics.in_progress.labels("solve").set(min(state.pool.in_flight,
                                                      state.pool.workers))
    return Response(state.metrics.render(),
                    media_type="text/plain; version=0.0.4; charset=utf-8")


def _store_ok(state: State) -> bool:
    """Whether the store answers; when it does not, the reason is logged (readiness
    reports only "down")."""
    try:
        return state.store.ping()
    except Exception as exc:  # any failure of the store means "not ready", never a 500
        log.warning("readiness: the store (%s) does not answer: %s: %s",
                    state.store.description, type(exc).__name__, exc)
        return False
