"""Supervised background tasks: a task that raises is logged and started again after a
backoff, so that one store error (the database restarting) or one bug in a job's
handling does not leave the replica without job runners: `/readyz`'s "jobs" stays true
and queued jobs keep running."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)
# Restarts back off from the first to the last delay (doubling), and come back to the
# first once a run lasted longer than the last: a task failing at once does not spin.
_FIRST_DELAY_S, _LAST_DELAY_S = 0.1, 5.0


def supervise(name: str, run: Callable[[], Awaitable[None]],
              restarts: list[int] | None = None) -> asyncio.Task[None]:
    """Run `run()` in a task named `name` until the task is cancelled, restarting it when
    it raises or returns. `restarts`, when given, gets one entry per restart (a counter
    the metrics and tests read)."""

    async def loop() -> None:
        delay = _FIRST_DELAY_S
        while True:
            began = time.monotonic()
            try:
                await run()
                log.error("%s returned; restarting it", name)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s failed; restarting it in %.1f s", name, delay)
            if restarts is not None:
                restarts.append(1)
            if time.monotonic() - began > _LAST_DELAY_S:
                delay = _FIRST_DELAY_S
            await asyncio.sleep(delay)
            delay = min(delay * 2, _LAST_DELAY_S)

    return asyncio.create_task(loop(), name=name)
