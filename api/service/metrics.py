"""Prometheus metrics of one app: requests, latencies, solves by method and status,
queue depth, cache hits. Each app has its own registry (tests build several apps)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from fastapi import Request, Response
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


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

    def render(self) -> bytes:
        return generate_latest(self.registry)

    async def middleware(self, request: Request,
                         call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        began = time.perf_counter()
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
            return response
        finally:
            route = request.scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            self.requests.labels(request.method, path, str(status)).inc()
            self.latency.labels(request.method, path).observe(time.perf_counter() - began)
