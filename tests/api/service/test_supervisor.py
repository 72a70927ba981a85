"""A supervised task outlives its failures: it is restarted after each, and ends only
when cancelled (the job runners under a store error, issue 29)."""

from __future__ import annotations

import asyncio

from ppsched.api.service.supervisor import supervise


def test_a_failing_task_is_restarted_until_it_runs() -> None:
    async def scenario() -> tuple[int, list[int], bool]:
        calls = 0
        running = asyncio.Event()

        async def flaky() -> None:
            nonlocal calls
            calls += 1
            if calls < 3:
                raise RuntimeError("the store does not answer")
            running.set()
            await asyncio.Event().wait()  # runs until cancelled

        restarts: list[int] = []
        task = supervise("flaky", flaky, restarts)
        await asyncio.wait_for(running.wait(), 30)
        alive = not task.done()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        return calls, restarts, alive

    calls, restarts, alive = asyncio.run(scenario())
    assert calls == 3 and len(restarts) == 2 and alive
