"""Python's cyclic garbage collector, paused while a solve allocates.

The heuristic and the schedule's construction allocate 10^5 small objects (ops, lists,
floats) that form no reference cycles: reference counting frees them all. Meanwhile
each allocation burst triggers collector passes over every live object, including the
caller's (issue 11: 60% of a p=32, m=256 solve in a process holding a large heap). The
pause ends with the block; what it left uncollected waits for the next pass.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector inside the block (it stays off if it was off)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
