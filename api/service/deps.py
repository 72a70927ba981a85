"""The app's shared parts (settings, store, pool, jobs, metrics) and their dependency
aliases for routes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request
from ppsched.api.service.config import Settings
from ppsched.api.service.flight import SingleFlight
from ppsched.api.service.jobs import JobManager
from ppsched.api.service.metrics import Metrics
from ppsched.api.service.pool import SolverPool
from ppsched.api.service.store import Store


@dataclass
class ServiceState:
    """Everything a route may use; built by `create_app`, opened by its lifespan."""

    settings: Settings
    store: Store
    pool: SolverPool
    jobs: JobManager
    metrics: Metrics
    examples: list[dict[str, Any]] = field(default_factory=list)
    started: bool = False
    flights: SingleFlight[str] = field(default_factory=SingleFlight)
    """Solves and views in progress, by content key (single-flight)."""


async def get_state(request: Request) -> ServiceState:
    # async: FastAPI runs a plain `def` dependency in its thread pool, a thread hop
    # (about a tenth of a millisecond of CPU) per route call for one attribute read.
    state: ServiceState = request.app.state.service
    return state


State = Annotated[ServiceState, Depends(get_state)]
