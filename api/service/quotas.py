"""Per-caller quotas: queued jobs, concurrent solves, request rate (a token bucket).

A caller is a tenant when keys are configured, else a client address (open mode): one
client cannot fill the job queue or take every solver for itself. Each refusal is a 429
with Retry-After whose JSON error names the quota's setting and its value.

Queued jobs are counted in the store (replicas share it); concurrent solves and the rate
are counted in this replica (each replica allows its own share).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from ppsched.api.service.config import Settings
from ppsched.api.service.errors import error_body

# Beyond this many buckets, full (idle) ones are dropped: a bucket at its burst is the
# same as no bucket, and open mode makes one per client address.
_MAX_BUCKETS = 10_000


class QuotaExceeded(Exception):
    """A caller over one of its quotas: 429 with Retry-After, naming the setting."""

    def __init__(self, setting: str, limit: float, who: str, what: str,
                 retry_after_s: int) -> None:
        self.setting, self.limit, self.who = setting, limit, who
        self.retry_after_s = max(1, retry_after_s)
        shown = f"{limit:g}" if isinstance(limit, float) else str(limit)
        super().__init__(f"quota exceeded: {what} for {who} (PPSCHED_{setting.upper()}"
                         f" = {shown}); retry in {self.retry_after_s} s")

    def body(self) -> dict[str, object]:
        return error_body(str(self), f"PPSCHED_{self.setting.upper()}", self.limit,
                          f"a retry after {self.retry_after_s} s")


def describe(owner: str) -> str:
    """An owner as a message names it: "tenant 'a'" or "client 127.0.0.1"."""
    if owner.startswith("client:"):
        return f"client {owner[len('client:'):]}"
    return f"tenant {owner!r}"


def queued_jobs_limit(settings: Settings) -> int:
    """Jobs one caller may have queued: the setting, else half the queue (at least 1),
    so that one caller leaves room for the others."""
    if settings.quota_queued_jobs is not None:
        return settings.quota_queued_jobs
    return max(1, settings.max_queued_jobs // 2)


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class Quotas:
    """The rate and concurrency counters of this replica, by owner."""

    def __init__(self, settings: Settings) -> None:
        self.rate = settings.quota_rate_per_s
        self.burst = settings.quota_burst
        self.concurrent = settings.quota_concurrent_solves
        self.retry_after_s = settings.retry_after_s
        self._buckets: dict[str, _Bucket] = {}
        self._solving: dict[str, int] = {}
        self._lock = threading.Lock()  # sync routes run in a thread pool

    def take(self, owner: str, now: float | None = None) -> None:
        """Spend one request token of `owner`'s bucket.

        Raises:
            QuotaExceeded: the bucket is empty; Retry-After is when a token is back.
        """
        if self.rate <= 0:
            return
        now = time.monotonic() if now is None else now
        with self._lock:
            bucket = self._buckets.get(owner)
            if bucket is None:
                if len(self._buckets) >= _MAX_BUCKETS:
                    self._drop_full(now)
                bucket = self._buckets[owner] = _Bucket(float(self.burst), now)
            bucket.tokens = min(float(self.burst),
                                bucket.tokens + (now - bucket.stamp) * self.rate)
            bucket.stamp = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return
            wait = math.ceil((1.0 - bucket.tokens) / self.rate)
        raise QuotaExceeded("quota_rate_per_s", self.rate, describe(owner),
                            f"more than {self.rate:g} requests per second (burst "
                            f"{self.burst})", wait)

    def _drop_full(self, now: float) -> None:
        for owner, bucket in list(self._buckets.items()):
            if bucket.tokens + (now - bucket.stamp) * self.rate >= self.burst:
                del self._buckets[owner]

    def enter(self, owner: str) -> None:
        """Count a solve of `owner` in progress (`leave` when it ends).

        Raises:
            QuotaExceeded: `owner` already has its quota of solves in progress.
        """
        with self._lock:
            count = self._solving.get(owner, 0)
            if self.concurrent <= 0 or count < self.concurrent:
                self._solving[owner] = count + 1
                return
        raise QuotaExceeded("quota_concurrent_solves", self.concurrent, describe(owner),
                            f"more than {self.concurrent} solves at once",
                            self.retry_after_s)

    def leave(self, owner: str) -> None:
        with self._lock:
            count = self._solving.get(owner, 0) - 1
            if count > 0:
                self._solving[owner] = count
            else:
                self._solving.pop(owner, None)

    def solving(self, owner: str) -> int:
        return self._solving.get(owner, 0)


def install_quota_handler(app: FastAPI) -> None:
    """Answer a `QuotaExceeded` raised by a route (the queued-jobs quota) as its 429."""

    async def _quota(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, QuotaExceeded)
        return JSONResponse(exc.body(), status_code=429,
                            headers={"Retry-After": str(exc.retry_after_s)})

    app.add_exception_handler(QuotaExceeded, _quota)
