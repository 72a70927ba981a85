"""The bounded pool of worker processes for synchronous solves: CPU-heavy work never
runs on the event loop, and when every worker and queue slot is taken the caller gets
`QueueFull` (503 with Retry-After) at once instead of waiting."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from api.service.errors import QueueFull, WorkerLost
from api.service.worker import watch_parent

log = logging.getLogger(__name__)
T = TypeVar("T")


class SolverPool:
    """`workers` processes, and at most `queue_size` calls waiting for one."""

    def __init__(self, workers: int, queue_size: int, retry_after_s: int) -> None:
        self.workers, self.queue_size, self.retry_after_s = workers, queue_size, retry_after_s
        self.in_flight = 0
        self._executor: ProcessPoolExecutor | None = None

    @property
    def capacity(self) -> int:
        return self.workers + self.queue_size

    @property
    def waiting(self) -> int:
        return max(0, self.in_flight - self.workers)

    def start(self) -> None:
        self._executor = ProcessPoolExecutor(
            max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=watch_parent)

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    @property
    def ready(self) -> bool:
        return self._executor is not None

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(*args)` in a worker process.

        Raises:
            QueueFull: every worker busy and the queue full.
            WorkerLost: the worker died (the pool is restarted for the next call).
        """
        if self.in_flight >= self.capacity:
            raise QueueFull("the solver pool", self.capacity, 503, self.retry_after_s)
        if self._executor is None:
            self.start()
        assert self._executor is not None
        self.in_flight += 1
        try:
            future = self._executor.submit(fn, *args)
            return await asyncio.wrap_future(future)
        except BrokenProcessPool as exc:
            log.error("a solver worker died: %s; restarting the pool", exc)
            self.shutdown()
            self.start()
            raise WorkerLost(f"a solver worker process died ({exc}); the pool was "
                             "restarted, retry the request") from None
        finally:
            self.in_flight -= 1
