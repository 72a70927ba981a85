"""Event-loop lag: how late a timer fires. A loop held by CPU work on its thread (a
parse, a serialisation, a slow store call made from it) delays every request, /healthz
included; this is the gauge that shows it. One sleep of `interval_s` at a time: the lag
is how much longer than asked it took."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def watch(observe: Callable[[float], None], interval_s: float = 0.25) -> None:
    """Call `observe(lag_s)` after each sleep, for ever (cancel the task to stop)."""
    while True:
        began = time.perf_counter()
        await asyncio.sleep(interval_s)
        observe(max(0.0, time.perf_counter() - began - interval_s))
