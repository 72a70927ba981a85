"""Per-rank orders generated only as far as a reader asks for them.

The V search (`solver.greedy.greedy_search`) times the named schedules of the placement
(ZB-V, V-Half, V-Min, DualPipe-V) against the best order so far, and most of them lose
within their first few hundred ops; at p=32, m=256 generating their 49k ops each cost
more than timing them (issue 11). A generator that writes each rank's order as an
iterator (`solver.generators.Generator.rows`) lets the timing pull ops as it goes: a
loser is generated no further than where it lost, a winner completely.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice

from ppsched.solver.model.ops import Op

# Ops pulled from a rank's iterator at a time: the first pulls are small, as a loser stops
# within its warm-up, and then grow so a winner pays little per pull.
_FIRST_PULL = 64
_MAX_PULL = 8192


class LazyOrders:
    """Per-rank orders, each a list (`rows`) that grows from its rank's iterator.

    Attributes:
        rows: the ops generated so far, per rank; a reader indexes these and calls `pull`
            when it reaches the end of one.
    """

    def __init__(self, rows: Iterable[Iterable[Op]]) -> None:
        self._sources: list[Iterator[Op] | None] = [iter(row) for row in rows]
        self.rows: list[list[Op]] = [[] for _ in self._sources]
        self._pull = [_FIRST_PULL] * len(self.rows)

    @classmethod
    def of(cls, orders: list[list[Op]]) -> LazyOrders:
        """Orders already complete, read in place (never copied nor extended)."""
        lazy = cls(())
        lazy.rows = orders
        lazy._sources = [None] * len(orders)
        lazy._pull = [0] * len(orders)
        return lazy

    def pull(self, rank: int) -> bool:
        """Extend `rows[rank]` by the next ops of its iterator; False once it has none."""
        source = self._sources[rank]
        if source is None:
            return False
        row = self.rows[rank]
        before = len(row)
        row.extend(islice(source, self._pull[rank]))
        self._pull[rank] = min(2 * self._pull[rank], _MAX_PULL)
        if len(row) == before:
            self._sources[rank] = None
            return False
        return True

    def complete(self) -> list[list[Op]]:
        """The whole orders: every iterator drained into its row."""
        for rank, source in enumerate(self._sources):
            if source is not None:
                self.rows[rank].extend(source)
                self._sources[rank] = None
        return self.rows
