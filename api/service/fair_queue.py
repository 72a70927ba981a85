"""The job runners' queue, fair between callers: one queue per owner (a tenant, or a
client address in open mode), taken round-robin, so one caller's thousand jobs do not
make everybody else's wait behind them; within one owner, first in, first out."""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque


class FairQueue:
    """Job ids by owner; `get` takes from the next owner in turn (asyncio, one loop)."""

    def __init__(self) -> None:
        # owner -> its waiting ids; the order of the keys is the turn (the owner served
        # last moves to the end).
        self._by_owner: OrderedDict[str, deque[str]] = OrderedDict()
        self._ready = asyncio.Event()

    def put_nowait(self, item: str, owner: str = "") -> None:
        self._by_owner.setdefault(owner, deque()).append(item)
        self._ready.set()

    def qsize(self) -> int:
        return sum(len(items) for items in self._by_owner.values())

    def get_nowait(self) -> str:
        """The next owner's oldest id.

        Raises:
            asyncio.QueueEmpty: nothing waits.
        """
        if not self._by_owner:
            raise asyncio.QueueEmpty
        owner, items = next(iter(self._by_owner.items()))
        item = items.popleft()
        del self._by_owner[owner]
        if items:
            self._by_owner[owner] = items  # back of the turn
        if not self._by_owner:
            self._ready.clear()
        return item

    async def get(self) -> str:
        while True:
            try:
                return self.get_nowait()
            except asyncio.QueueEmpty:
                await self._ready.wait()
