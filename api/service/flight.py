"""Single-flight: concurrent calls for the same key share one piece of work (32
identical new requests make one solve, eight requests for one view draw it once). The
work is cancelled when the last caller waiting for it goes away (a client disconnect)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from ppsched.api.service.errors import ClientGone
from starlette.requests import Request
from starlette.types import Receive

T = TypeVar("T")


class SingleFlight(Generic[T]):
    """At most one running task per key; every caller for that key awaits it."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[T]] = {}
        self._waiters: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._tasks)

    async def run(self, key: str, work: Callable[[], Awaitable[T]],
                  receive: Receive | None = None) -> T:
        """`await work()`, or join the call already running for `key`; with `receive` (an
        ASGI app's, once the body is read), unless the client disconnects first
        (`unless_gone`, without wrapping this call in a task of its own: one task fewer
        a request on the service's main process, issue 29).

        A caller that goes away does not cancel the shared task while others wait for it
        (`shield`, or `asyncio.wait`, which never cancels what it waits for); the last one
        to go cancels it.

        Raises:
            ClientGone: the client went away (with `receive` only)."""
        task = self._tasks.get(key)
        if task is None:
            task = asyncio.ensure_future(work())
            self._tasks[key] = task
            task.add_done_callback(lambda done: self._forget(key, done))
        self._waiters[key] = self._waiters.get(key, 0) + 1
        try:
            if receive is None:
                return await asyncio.shield(task)
            return await _first_of(task, receive)
        except (asyncio.CancelledError, ClientGone):
            if self._waiters.get(key) == 1 and not task.done():
                task.cancel()
            raise
        finally:
            self._waiters[key] -= 1
            if not self._waiters[key]:
                del self._waiters[key]

    def _forget(self, key: str, task: asyncio.Task[T]) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
        if not task.cancelled():
            task.exception()  # retrieved: a failure nobody awaited is not logged as lost


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """`await work`, cancelling it if the client disconnects first.

    Raises:
        ClientGone: the client went away (nobody reads the answer)."""
    return await unless_gone(request.receive, work)


async def unless_gone(receive: Receive, work: Awaitable[T]) -> T:
    """`unless_disconnected` for an ASGI app's `receive`, once the body is read."""
    task = asyncio.ensure_future(work)
    try:
        return await _first_of(task, receive)
    except (asyncio.CancelledError, ClientGone):
        task.cancel()
        raise


async def _first_of(task: asyncio.Future[T], receive: Receive) -> T:
    """`task`'s result, or `ClientGone` if the client disconnects first; `task` is left
    running either way (and when this call is cancelled): its owner decides."""

    async def disconnected() -> None:
        # The body is read: the next message the server has for us is the disconnect.
        while (await receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(disconnected())
    either: set[asyncio.Future[Any]] = {task, watcher}
    try:
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if task.done():
        return task.result()
    raise ClientGone("the client closed the connection; its work was cancelled")
