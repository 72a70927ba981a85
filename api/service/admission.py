"""Admission before parsing: when every solver worker and queue slot is taken, a request
that would need one (POST /v1/schedules, /v1/pack, /v1/advise, /v1/simulate,
/v1/validate) is answered 503 with Retry-After at once, before
its body is read, parsed, validated or looked up (under overload those cost seconds)."""

from __future__ import annotations

import json

from ppsched.api.service.errors import QueueFull, error_body
from ppsched.api.service.pool import SolverPool
from ppsched.api.service.pooled_paths import POOLED_POSTS
from starlette.types import ASGIApp, Receive, Scope, Send

# Paths whose requests take a worker of the pool: every CPU-heavy POST (issue 29).
GUARDED = frozenset({*POOLED_POSTS, "/v1/schedules/"})


class Admission:
    """ASGI middleware: a capacity check (two integers) ahead of everything else."""

    def __init__(self, app: ASGIApp, pool: SolverPool) -> None:
        self.app, self.pool = app, pool

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and \
                scope["path"] in GUARDED and self.pool.in_flight >= self.pool.capacity:
            exc = QueueFull("the solver pool", self.pool.capacity, 503,
                            self.pool.retry_after_s)
            data = json.dumps(error_body(str(exc), None, None, f"a retry after "
                                         f"{exc.retry_after_s} s")).encode()
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(data)).encode()),
                                    (b"retry-after", str(exc.retry_after_s).encode())]})
            await send({"type": "http.response.body", "body": data})
            return
        await self.app(scope, receive, send)
