"""Prometheus metrics of one app: requests, latencies, solves by method and status,
queue depth, cache hits. Each app has its own registry (tests build several apps)."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send


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

    def asgi(self, app: ASGIApp) -> ASGIApp:
        """A pure ASGI middleware counting each request and its latency, by route (not
        Starlette's `BaseHTTPMiddleware`, whose task and stream per request cost about
        half of the main process's CPU for an uncached solve)."""

        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            began = time.perf_counter()
            status = 500

            async def send_status(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                await send(message)

            try:
                await app(scope, receive, send_status)
            finally:
                # The router writes the matched route into the scope it was given.
                route = scope.get("route")
                path = getattr(route, "path", None) or "unmatched"
                self.requests.labels(scope["method"], path, str(status)).inc()
                self.latency.labels(scope["method"], path).observe(
                    time.perf_counter() - began)
        return middleware
