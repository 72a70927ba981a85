"""The job runners' queue, fair between callers: one queue per owner (a tenant, or a
client address in open mode), so one caller's thousand jobs do not make everybody else's
wait behind them. The next job is the oldest of the waiting owner served longest ago (one
never served first); within one owner, first in, first out."""

from __future__ import annotations

import asyncio
import itertools
from collections import deque

# Past this many remembered owners, those with nothing waiting are forgotten (they then
# count as never served, which only favours them once).
_MAX_REMEMBERED = 10_000


class FairQueue:
    """Job ids by owner; `get` serves owners in turn (asyncio, one loop)."""

    def __init__(self) -> None:
        self._waiting: dict[str, deque[str]] = {}  # owner -> ids, in arrival order
        self._served: dict[str, int] = {}  # owner -> when it was last served (a count)
        self._clock = itertools.count()
        self._ready = asyncio.Event()

    def put_nowait(self, item: str, owner: str = "") -> None:
        self._waiting.setdefault(owner, deque()).append(item)
        self._ready.set()

    def qsize(self) -> int:
        return sum(len(items) for items in self._waiting.values())

    def get_nowait(self) -> str:
        """The oldest id of the waiting owner served longest ago.

        Raises:
            asyncio.QueueEmpty: nothing waits.
        """
        if not self._waiting:
            raise asyncio.QueueEmpty
        # min() keeps the first of equals: owners that arrived first (dict order) win ties.
        owner = min(self._waiting, key=lambda o: self._served.get(o, -1))
        items = self._waiting[owner]
        item = items.popleft()
        if not items:
            del self._waiting[owner]
        self._served[owner] = next(self._clock)
        if len(self._served) > _MAX_REMEMBERED:
            self._served = {o: t for o, t in self._served.items() if o in self._waiting}
        if not self._waiting:
            self._ready.clear()
        return item

    async def get(self) -> str:
        while True:
            try:
                return self.get_nowait()
            except asyncio.QueueEmpty:
                await self._ready.wait()
