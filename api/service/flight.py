"""Single-flight: concurrent calls for the same key share one piece of work (32
identical new requests make one solve, eight requests for one view draw it once)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    """At most one running task per key; every caller for that key awaits it."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[T]] = {}

    def __len__(self) -> int:
        return len(self._tasks)

    async def run(self, key: str, work: Callable[[], Awaitable[T]]) -> T:
        """`await work()`, or join the call already running for `key`.

        A caller that goes away (its request cancelled) does not cancel the shared task
        for the others (`shield`)."""
        task = self._tasks.get(key)
        if task is None:
            task = asyncio.ensure_future(work())
            self._tasks[key] = task
            task.add_done_callback(lambda done: self._forget(key, done))
        return await asyncio.shield(task)

    def _forget(self, key: str, task: asyncio.Task[T]) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
        if not task.cancelled():
            task.exception()  # retrieved: a failure nobody awaited is not logged as lost
