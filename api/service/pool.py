"""The bounded pool of worker processes for synchronous solves and views: CPU-heavy work
never runs on the event loop, and when every worker and queue slot is taken the caller
gets `QueueFull` (503 with Retry-After) at once instead of waiting.

Each worker is a process with its own pipe, not a `ProcessPoolExecutor`: a worker that
dies fails only the call it was running and is replaced, alone (an executor breaks as a
whole and fails every call in flight); a call whose caller goes away (a client
disconnect) kills its worker, which is replaced, so the slot is free at once; and pipes
need no named semaphores, so none can leak.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

from ppsched.api.service import pipe_io
from ppsched.api.service.budgets import TimeBudgetExceeded
from ppsched.api.service.errors import QueueFull, WorkerLost
from ppsched.api.service.worker import serve_calls

log = logging.getLogger(__name__)
T = TypeVar("T")


class _Worker:
    """One worker process and the service's end of its pipe."""

    def __init__(self, context: Any, index: int) -> None:
        self.conn, child = context.Pipe(duplex=True)
        self.process: BaseProcess = context.Process(
            target=serve_calls, args=(child,), name=f"ppsched-worker-{index}", daemon=True)
        self.process.start()
        child.close()  # ours closed: the child's death is an EOF on our end
        self.ready = False  # its ("ready", None) not read yet: it is importing

    def stop(self, timeout_s: float) -> None:
        try:
            self.conn.send(None)  # asks it to exit between calls
        except OSError:
            pass
        self.process.join(timeout_s)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(1)
        self.conn.close()


class SolverPool:
    """`workers` processes, and at most `queue_size` calls waiting for one."""

    def __init__(self, workers: int, queue_size: int, retry_after_s: int) -> None:
        self.workers, self.queue_size, self.retry_after_s = workers, queue_size, retry_after_s
        self.in_flight = 0
        self.replaced = 0  # workers that died or were killed, and were replaced
        self._context = multiprocessing.get_context("spawn")
        self._idle: asyncio.Queue[_Worker] | None = None
        self._all: list[_Worker] = []
        self._started = 0
        self.on_wait: Callable[[float], None] | None = None
        """Called with each call's wait for a worker, in seconds (a metric)."""

    @property
    def capacity(self) -> int:
        return self.workers + self.queue_size

    @property
    def waiting(self) -> int:
        return max(0, self.in_flight - self.workers)

    @property
    def ready(self) -> bool:
        return self._idle is not None

    def start(self) -> None:
        self._idle = asyncio.Queue()
        for _ in range(self.workers):
            self._idle.put_nowait(self._spawn())

    def _spawn(self) -> _Worker:
        worker = _Worker(self._context, self._started)
        self._started += 1
        self._all.append(worker)
        return worker

    def _replace(self, worker: _Worker) -> None:
        worker.process.kill()
        worker.process.join(1)
        worker.conn.close()
        self._all.remove(worker)
        self.replaced += 1
        if self._idle is not None:
            self._idle.put_nowait(self._spawn())

    async def shutdown(self, timeout_s: float = 5.0) -> None:
        """Stop every worker (idle ones exit at once; uvicorn has drained the requests
        before the app's shutdown runs), off the event loop."""
        workers, self._all, self._idle = self._all, [], None
        await asyncio.gather(*(asyncio.to_thread(w.stop, timeout_s) for w in workers))

    async def run(self, fn: Callable[..., T], *args: Any, timeout_s: float | None = None) -> T:
        """Run `fn(*args)` in a worker process (`fn` a module-level function), for at
        most `timeout_s` seconds once a worker has it (None: no limit).

        Raises:
            QueueFull: every worker busy and the queue full.
            WorkerLost: the worker died during the call (it is replaced).
            TimeBudgetExceeded: the call ran past `timeout_s` (its worker is replaced).
        """
        if self.in_flight >= self.capacity:
            raise QueueFull("the solver pool", self.capacity, 503, self.retry_after_s)
        if self._idle is None:
            self.start()
        assert self._idle is not None
        self.in_flight += 1
        try:
            asked = time.perf_counter()
            worker = await self._idle.get()
            if self.on_wait is not None:
                self.on_wait(time.perf_counter() - asked)
            try:
                if not worker.ready:
                    # A fresh worker first imports its modules: not the call's time.
                    await pipe_io.recv(worker.conn)
                    worker.ready = True
                worker.conn.send((fn, args))
                # Never blocks the loop (the reply is read as its bytes arrive); a dead
                # child ends it (EOF). `timeout`, not `wait_for`: on Python 3.11 wait_for
                # runs the read as a task of its own, a task more per call on the main
                # process (issue 29).
                async with asyncio.timeout(timeout_s):
                    outcome, value = await pipe_io.recv(worker.conn)
            except TimeoutError:
                # Past its budget (the read was cancelled; the rest of the reply, if
                # any, goes with the worker): killing the worker frees the slot, and a
                # fresh worker takes its place.
                log.warning("a call ran past its %.1f s budget: its worker %s is replaced",
                            timeout_s, worker.process.pid)
                self._replace(worker)
                raise TimeBudgetExceeded(timeout_s or 0.0) from None
            except asyncio.CancelledError:
                # The caller went away: the worker would solve for nobody. Kill it, so
                # the slot is free now, and start another.
                log.info("a call was cancelled: its worker %s is replaced", worker.process.pid)
                self._replace(worker)
                raise
            except (EOFError, OSError) as exc:
                code = worker.process.exitcode
                log.error("solver worker %s died (exit code %s): replaced",
                          worker.process.pid, code)
                self._replace(worker)
                raise WorkerLost(f"the solver worker process died (exit code {code}) while "
                                 "answering this request; it was replaced, retry the "
                                 "request") from exc
            self._idle.put_nowait(worker)
            if outcome == "error":
                raise value
            result: T = value
            return result
        finally:
            self.in_flight -= 1
