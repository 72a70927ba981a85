"""The FastAPI app: `create_app(settings)` wires the store, the solver pool, the job
runners, the routers, the error mapping and the metrics. Run it with `ppsched serve`
(or `uvicorn --factory api.service.main:app_from_env`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from ppsched.api.service import loop_lag, retention, tracing
from ppsched.api.service.admission import Admission
from ppsched.api.service.answer_memo import AnswerMemo
from ppsched.api.service.body_timeout import install_body_timeout
from ppsched.api.service.config import Settings
from ppsched.api.service.contract import declare_statuses as declare_route_statuses
from ppsched.api.service.contract import install_allow
from ppsched.api.service.deps import ServiceState
from ppsched.api.service.errors import install_error_handlers
from ppsched.api.service.gate import Gate, declare_statuses
from ppsched.api.service.headers import SecurityHeaders
from ppsched.api.service.jobs import JobManager
from ppsched.api.service.limits import BodyLimit
from ppsched.api.service.metrics import Metrics
from ppsched.api.service.pool import SolverPool
from ppsched.api.service.quotas import Quotas, install_quota_handler
from ppsched.api.service.request_ids import RequestIds
from ppsched.api.service.routers import (
    advise,
    catalog,
    checks,
    docs,
    health,
    jobs,
    partition,
    schedules,
    static,
)
from ppsched.api.service.routers import pack as pack_router
from ppsched.api.service.schedule_fast_path import ScheduleFastPath
from ppsched.api.service.store import open_store
from ppsched.api.service.store_errors import count_errors
from ppsched.api.service.tenants import Tenants
from ppsched.solver.model import Profile, Schedule

log = logging.getLogger(__name__)

DESCRIPTION = """Pipeline-parallel schedules (Zero Bubble: F, B, W) for a profile of
measured times, latency and memory. Profiles and schedules are the JSON of the project's
DESIGN.md (sections 2 and 4). Every error is JSON: `{"message", "field", "value",
"accepted"}`."""


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the service; its store, pool and job runners open when the app starts."""
    settings = settings or Settings()
    metrics = Metrics()
    # Keys first: a bad key setting stops start-up before a store or a worker opens.
    tenants = Tenants.from_settings(
        settings.api_keys.get_secret_value() if settings.api_keys else None,
        settings.api_keys_file)
    store = open_store(settings)
    count_errors(store, lambda op, error: metrics.store_errors.labels(op, error).inc())
    state = ServiceState(
        settings=settings, store=store,
        pool=SolverPool(settings.workers, settings.queue_size, settings.retry_after_s),
        jobs=JobManager(settings, store, metrics), metrics=metrics)
    _watch_parts(state)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.examples = catalog.load_examples(settings.profiles_dir)
        state.pool.start()
        await state.jobs.start()
        cleaner = asyncio.create_task(retention.cleanup(store, settings), name="retention")
        state.started = True
        lag = asyncio.create_task(loop_lag.watch(_observe_lag(metrics)), name="loop-lag")
        log.info("ppsched service ready: %d solver workers, %d job workers, store %s",
                 settings.workers, settings.job_workers, store.description)
        log.info("API keys: %s", f"{len(tenants.names)} tenants" if tenants.enabled else
                 "none (open mode: anyone who reaches this port may use it)")
        try:
            yield
        finally:
            state.started = False
            cleaner.cancel()
            lag.cancel()
            await state.jobs.stop()
            await state.pool.shutdown()
            store.close()

    # /docs and /redoc come from local files (routers/docs.py), not FastAPI's CDN pages.
    # The spans are `tracing.Tracing`'s: FastAPI's own telemetry (0.165 on; older
    # versions keep the setting as an unused extra) would add a second server span per
    # request wherever a provider is installed, and without one still checks for one on
    # every request of the main process.
    app = FastAPI(title="ppsched", version="0.1.0", description=DESCRIPTION,
                  lifespan=lifespan, docs_url=None, redoc_url=None,
                  telemetry={"tracing": False, "metrics": False, "logs": False})
    app.state.service = state
    app.state.settings = settings
    for module in (schedules, jobs, checks, catalog, health, static, advise, partition,
                   docs):
        app.include_router(module.router)
    app.include_router(pack_router.router)  # POST /v1/pack (issue 13)
    install_error_handlers(app)
    # Innermost: a new POST /v1/schedules parsed and solved in a worker from its bytes;
    # then a repeated one answered from the store unparsed.
    app.add_middleware(ScheduleFastPath, state=state, handlers=app.exception_handlers)
    app.add_middleware(AnswerMemo, state=state)
    app.add_middleware(metrics.asgi)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    # Outside the body limit: a full pool refuses before the body is even read.
    app.add_middleware(Admission, pool=state.pool)
    # Keys and per-caller quotas (issue 29): outside admission, so an unknown caller
    # learns nothing of the pool's state.
    app.add_middleware(Gate, tenants=tenants, quotas=Quotas(settings),
                       metrics_open=settings.metrics_open)
    install_quota_handler(app)
    # Outside the body limit (which reads bodies of no declared length): bodies in time.
    install_body_timeout(app, settings.body_timeout_s)
    install_allow(app)  # 405s name every method of their path
    # Outermost, so that the body limit's 413 carries the headers too.
    app.add_middleware(SecurityHeaders)
    # Eyes (issue 29): each request's CPU share, its trace span where OpenTelemetry is
    # installed, and outermost its id, so that every response and log line carries it.
    app.add_middleware(metrics.cpu_asgi)
    tracer = tracing.tracer()
    if tracer is not None:
        app.add_middleware(tracing.Tracing, tracer_=tracer)
    app.add_middleware(RequestIds)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version,
                                 description=app.description, routes=app.routes)
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for model in (Profile, Schedule):
                model_schema = model.model_json_schema(
                    ref_template="#/components/schemas/{model}")
                components.update(model_schema.pop("$defs", {}))
                components[model.__name__] = model_schema
            _errors_are_error_bodies(schema)
            declare_statuses(schema)  # 401 and 429 of the gate (tenants, quotas)
            # every status each route answers, the limits the schemas state (issue 29)
            declare_route_statuses(schema, settings)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _errors_are_error_bodies(schema: dict[str, Any]) -> None:
    """FastAPI documents request-validation 422s as its own shape; ours is `ErrorBody`."""
    ours = {"$ref": "#/components/schemas/ErrorBody"}
    for operations in schema["paths"].values():
        for operation in operations.values():
            response = operation.get("responses", {}).get("422")
            if response is not None:
                response["content"] = {"application/json": {"schema": ours}}
    for name in ("HTTPValidationError", "ValidationError"):
        schema["components"]["schemas"].pop(name, None)


def _watch_parts(state: ServiceState) -> None:
    """The runner's liveness, read at each scrape (the pool's queue depth is set by
    /metrics itself), and the pool's wait times."""
    metrics, pool = state.metrics, state.pool
    metrics.runner_alive.set_function(lambda: float(state.jobs.ready))
    pool.on_wait = metrics.pool_wait.observe


def _observe_lag(metrics: Metrics) -> Callable[[float], None]:
    def observe(lag_s: float) -> None:
        metrics.loop_lag.set(lag_s)
        metrics.loop_lag_seconds.observe(lag_s)
    return observe


def app_from_env() -> FastAPI:
    """The app with settings from the environment (for `uvicorn --factory`)."""
    return create_app(Settings())
