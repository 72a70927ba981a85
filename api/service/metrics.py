"""Prometheus metrics of one app: requests, latencies, solves by method and status,
queue depth, cache hits. Each app has its own registry (tests build several apps)."""

from __future__ import annotations

import time

from ppsched.api.service.cpu_share import CpuShare
from ppsched.api.service.response_status import StatusRecorder
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.types import ASGIApp, Receive, Scope, Send

TENANT_KEY = "tenant"
"""The request-state key (``request.state.tenant``) naming the request's tenant."""


def route_of(scope: Scope) -> str:
    """The matched route's template (``/v1/jobs/{job_id}``), never the raw path (one
    label per id would grow the registry without bound)."""
    return getattr(scope.get("route"), "path", None) or "unmatched"


def tenant_of(scope: Scope) -> str | None:
    """The tenant the request was authenticated as, None in open mode."""
    state = scope.get("state")
    tenant = state.get(TENANT_KEY) if isinstance(state, dict) else \
        getattr(state, TENANT_KEY, None)
    return str(tenant) if tenant else None


class Metrics:
    """The service's instruments."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("ppsched_http_requests", "HTTP requests answered.",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("ppsched_http_request_duration_seconds",
                                 "Time to answer a request.", ["method", "route"],
                                 registry=self.registry,
                                 buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
                                          5, 10, 30, 60))
        self.solves = Counter("ppsched_solves", "Solves finished, by method and status "
                              "(optimal, feasible, heuristic, ..., error, cancelled).",
                              ["method", "status"], registry=self.registry)
        self.queue_depth = Gauge("ppsched_queue_depth", "Work waiting for a worker.",
                                 ["queue"], registry=self.registry)
        self.in_progress = Gauge("ppsched_in_progress", "Work running on a worker.",
                                 ["queue"], registry=self.registry)
        self.cache_hits = Counter("ppsched_cache_hits", "Schedule requests answered from "
                                  "the store.", registry=self.registry)
        self.cache_misses = Counter("ppsched_cache_misses", "Schedule requests that had to "
                                    "be solved.", registry=self.registry)
        self._eyes()

    # Eyes on the service (issue 29): what /healthz timing out would otherwise hide.
    def _eyes(self) -> None:
        registry = self.registry
        self.loop_lag = Gauge("ppsched_event_loop_lag_seconds", "How late the event "
                              "loop's last timer fired (CPU work holding the loop).",
                              registry=registry)
        self.loop_lag_seconds = Histogram(
            "ppsched_event_loop_lag_observed_seconds", "How late each timer of the event "
            "loop's watch fired.", registry=registry,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        self.main_cpu = Histogram(
            "ppsched_http_main_cpu_seconds", "Main-process CPU per request (the process's "
            "CPU shared equally among the requests in flight).", ["method", "route"],
            registry=registry, buckets=(0.0005, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.01,
                                        0.025, 0.05, 0.1, 0.25, 1))
        self.pool_wait = Histogram(
            "ppsched_pool_wait_seconds", "Time a call waited for a solver worker.",
            registry=registry, buckets=(0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5,
                                        1, 2.5, 5, 10, 30))
        self.job_wait = Histogram(
            "ppsched_job_wait_seconds", "Time a job waited queued before it started.",
            ["method"], registry=registry,
            buckets=(0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 14400))
        self.job_run = Histogram(
            "ppsched_job_run_seconds", "Time a job ran (start to its end).", ["method"],
            registry=registry, buckets=(0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600))
        self.runner_alive = Gauge("ppsched_job_runner_alive", "1 while every job runner "
                                  "of this replica is alive, else 0.", registry=registry)
        self.store_errors = Counter("ppsched_store_errors", "Store calls that raised, by "
                                    "operation and error class.", ["operation", "error"],
                                    registry=registry)
        # Per-tenant usage: read from the request's state (`TENANT_KEY`), set by the
        # tenants' authentication; absent (open mode), these stay empty.
        self.tenant_requests = Counter(
            "ppsched_tenant_requests", "HTTP requests answered, by tenant.",
            ["tenant", "route", "status"], registry=registry)
        self.tenant_cpu = Counter(
            "ppsched_tenant_main_cpu_seconds", "Main-process CPU spent on a tenant's "
            "requests (as ppsched_http_main_cpu_seconds).", ["tenant"], registry=registry)
        self.cpu_share = CpuShare()

    def cpu_asgi(self, app: ASGIApp) -> ASGIApp:
        """A pure ASGI middleware (outside admission and the body limit, so that their
        refusals are counted too): each request's share of the main process's CPU by
        route, and by tenant where the request has one."""

        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            answered = StatusRecorder(send)
            token = self.cpu_share.enter()
            try:
                await app(scope, receive, answered)
            finally:
                cpu = self.cpu_share.leave(token)
                route = route_of(scope)
                self.main_cpu.labels(scope["method"], route).observe(cpu)
                tenant = tenant_of(scope)
                if tenant is not None:
                    self.tenant_requests.labels(tenant, route, str(answered.status)).inc()
                    self.tenant_cpu.labels(tenant).inc(cpu)
        return middleware

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def asgi(self, app: ASGIApp) -> ASGIApp:
        """A pure ASGI middleware counting each request and its latency, by route (not
        Starlette's `BaseHTTPMiddleware`, whose task and stream per request cost about
        half of the main process's CPU for an uncached solve)."""

        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            began = time.perf_counter()
            answered = StatusRecorder(send)
            try:
                await app(scope, receive, answered)
            finally:
                # The router writes the matched route into the scope it was given.
                route = scope.get("route")
                path = getattr(route, "path", None) or "unmatched"
                self.requests.labels(scope["method"], path, str(answered.status)).inc()
                self.latency.labels(scope["method"], path).observe(
                    time.perf_counter() - began)
        return middleware
