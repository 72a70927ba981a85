"""`SingleFlight.run` with a client's `receive`: a caller whose client goes away gets
`ClientGone` and leaves the shared work to the others; the last one cancels it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from ppsched.api.service.errors import ClientGone
from ppsched.api.service.flight import SingleFlight


class Client:
    """An ASGI `receive` whose next message, once `leave` is called, is the disconnect."""

    def __init__(self) -> None:
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    def leave(self) -> None:
        self.gone.set()


def test_a_caller_that_leaves_does_not_cancel_the_work_others_wait_for() -> None:
    async def main() -> None:
        flights: SingleFlight[str] = SingleFlight()
        started, release = asyncio.Event(), asyncio.Event()
        runs = 0

        async def work() -> str:
            nonlocal runs
            runs += 1
            started.set()
            await release.wait()
            return "answer"

        first, second = Client(), Client()
        leaving = asyncio.ensure_future(flights.run("k", work, first.receive))
        staying = asyncio.ensure_future(flights.run("k", work, second.receive))
        await started.wait()
        first.leave()
        with pytest.raises(ClientGone):
            await leaving
        release.set()
        assert await staying == "answer" and runs == 1
        assert len(flights) == 0

    asyncio.run(main())


def test_the_last_caller_to_leave_cancels_the_work() -> None:
    async def main() -> None:
        flights: SingleFlight[str] = SingleFlight()
        started = asyncio.Event()
        cancelled = asyncio.Event()

        async def work() -> str:
            started.set()
            try:
                await asyncio.Event().wait()  # never set: only a cancel ends it
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return "never"

        client = Client()
        waiting = asyncio.ensure_future(flights.run("k", work, client.receive))
        await started.wait()
        client.leave()
        with pytest.raises(ClientGone):
            await waiting
        await asyncio.wait_for(cancelled.wait(), 60)  # the work saw its cancel

    asyncio.run(main())


def test_a_caller_cancelled_itself_cancels_the_work_it_alone_waited_for() -> None:
    async def main() -> None:
        flights: SingleFlight[str] = SingleFlight()
        started, cancelled = asyncio.Event(), asyncio.Event()

        async def work() -> str:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return "never"

        waiting = asyncio.ensure_future(flights.run("k", work, Client().receive))
        await started.wait()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await asyncio.wait_for(cancelled.wait(), 60)

    asyncio.run(main())
