"""Contiguous cuts of a per-layer profile and their bound (DESIGN.md 6.7): the dynamic
program over cuts, and the cuts under a threshold of the bound, cheapest first.

A cut gives rank `s` the layers ``[i, j)``. Its **stage bound** holds for every schedule
of that cut under the DESIGN.md cost model (makespan, from the first op's start at 0):

- rank `s` starts nothing before microbatch 0's forward has crossed stages ``0..s-1``
  (``head``: their ``t_f`` and the links' latencies), then runs ``m`` times its
  ``t_f + t_b + t_w``;
- every F and B of rank `s` ends by its last B, after which that microbatch's input
  gradient still crosses stages ``s-1..0`` (``tail``: their ``t_b`` and the latencies), so
  ``head + m (t_f + t_b) + tail`` bounds it too.

- memory: rank `s` holds a microbatch's ``m_b`` from its F's end to its B's start, a
  stretch of at least ``trip`` (the forward and backward through every later layer and
  link), and at most ``k = floor(limit / m_b)`` at once; of ``m`` such stretches with at
  most ``k`` overlapping, the ``(i + k)``-th starts after one of the ``k`` before it ends,
  so the last ends ``ceil(m / k) * trip`` after the first starts: ``head + t_f + ceil(m /
  k) trip + t_b + tail`` bounds it.

All depend on ``i`` and ``j`` only (prefix sums), so the cut's bound, the largest of its
stages', is a bottleneck objective: a dynamic program finds the least over every cut, and
a count by threshold lists the cuts in order of it. Memory: rank `s` must hold its layers'
``m_b`` for one microbatch (`Problem.min_memory_per_rank`), within its limit.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate

from ppsched.solver.model.layers import LayerProfile

Cut = tuple[int, ...]


@dataclass(frozen=True)
class CutCosts:
    """Each (stage, first layer, end layer)'s bound, or infinity where memory forbids it."""

    num_ranks: int
    num_layers: int
    cost: tuple[tuple[tuple[float, ...], ...], ...]
    """cost[s][i][j]: the stage bound of rank s holding layers [i, j) (j > i)."""

    @classmethod
    def of(cls, layers: LayerProfile) -> CutCosts:
        p, n, m = layers.num_ranks, len(layers.layers), layers.num_microbatches
        prefix = {f: [0.0, *accumulate(getattr(x, f) for x in layers.layers)]
                  for f in ("t_f", "t_b", "t_w", "m_b")}
        latency = [0.0, *accumulate(layers.link_latency(k) for k in range(p - 1))]
        tf, tb, tw, mb = (prefix[f] for f in ("t_f", "t_b", "t_w", "m_b"))
        cost = []
        for s in range(p):
            limit = layers.rank_limit(s)
            rows = []
            for i in range(n):
                head = tf[i] + latency[s]
                tail = tb[i] + latency[s]
                row = [math.inf] * (n + 1)
                for j in range(i + 1, n + 1):
                    if mb[j] - mb[i] > limit + 1e-9:
                        break  # more layers only need more memory
                    fb = (tf[j] - tf[i]) + (tb[j] - tb[i])
                    waves = _waves(m, limit, mb[j] - mb[i])
                    trip = (tf[n] - tf[j]) + (tb[n] - tb[j]) + 2 * (latency[p - 1]
                                                                    - latency[s])
                    row[j] = max(head + m * (fb + tw[j] - tw[i]), head + m * fb + tail,
                                 head + (tf[j] - tf[i]) + waves * trip + (tb[j] - tb[i])
                                 + tail)
                rows.append(tuple(row))
            cost.append(tuple(rows))
        return cls(p, n, tuple(cost))

    def bound(self, cut: Cut) -> float:
        """The cut's bound: its largest stage bound (infinite if memory forbids it)."""
        worst, start = 0.0, 0
        for s, count in enumerate(cut):
            worst = max(worst, self.cost[s][start][start + count])
            start += count
        return worst

    def _stages(self, s: int, i: int) -> range:
        """The ends j of rank s's layers starting at i that leave a layer per later rank."""
        return range(i + 1, self.num_layers - (self.num_ranks - 1 - s) + 1) \
            if s < self.num_ranks - 1 else range(self.num_layers, self.num_layers + 1)

    def least(self) -> tuple[float, Cut | None]:
        """The least bound over every cut, and a cut reaching it (None: no cut fits)."""
        p, n = self.num_ranks, self.num_layers
        best = [[math.inf] * (n + 1) for _ in range(p + 1)]
        choice = [[0] * (n + 1) for _ in range(p)]
        best[p][n] = 0.0
        for s in range(p - 1, -1, -1):
            for i in range(s, n - (p - 1 - s)):
                for j in self._stages(s, i):
                    value = max(self.cost[s][i][j], best[s + 1][j])
                    if value < best[s][i]:
                        best[s][i], choice[s][i] = value, j
        if math.isinf(best[0][0]):
            return math.inf, None
        cut, i = [], 0
        for s in range(p):
            cut.append(choice[s][i] - i)
            i = choice[s][i]
        return best[0][0], tuple(cut)

    def _reach(self, threshold: float) -> list[list[int]]:
        """count[s][i]: the cuts of layers [i, n) into ranks s..p-1 with every stage bound
        <= threshold."""
        p, n = self.num_ranks, self.num_layers
        count = [[0] * (n + 1) for _ in range(p + 1)]
        count[p][n] = 1
        for s in range(p - 1, -1, -1):
            for i in range(s, n - (p - 1 - s)):
                count[s][i] = sum(count[s + 1][j] for j in self._stages(s, i)
                                  if self.cost[s][i][j] <= threshold)
        return count

    def count_under(self, threshold: float) -> int:
        """How many cuts have a bound <= threshold."""
        return self._reach(threshold)[0][0]

    def under(self, threshold: float, limit: int) -> Iterator[Cut]:
        """Up to `limit` cuts with a bound <= threshold (in no particular order)."""
        count = self._reach(threshold)
        found = 0
        path: list[int] = []

        def walk(s: int, i: int) -> Iterator[Cut]:
            nonlocal found
            if s == self.num_ranks:
                found += 1
                yield tuple(path)
                return
            for j in self._stages(s, i):
                if found >= limit:
                    return
                if self.cost[s][i][j] <= threshold and count[s + 1][j]:
                    path.append(j - i)
                    yield from walk(s + 1, j)
                    path.pop()

        yield from walk(0, 0)

    def values(self) -> list[float]:
        """Every finite stage bound, sorted and distinct: the thresholds worth trying."""
        return sorted({x for stage in self.cost for row in stage for x in row
                       if not math.isinf(x)})

    def threshold_for(self, budget: int, least: float) -> tuple[float, float]:
        """The largest stage-bound value whose cuts number at most `budget` (at least the
        least bound), and the next value above it (infinity if none): every cut not
        listed under the first has a bound >= the second."""
        values = [x for x in self.values() if x >= least]
        lo, hi = 0, len(values) - 1  # values[lo] is the least bound: always taken
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.count_under(values[mid]) <= budget:
                lo = mid
            else:
                hi = mid - 1
        upper = values[lo + 1] if lo + 1 < len(values) else math.inf
        return values[lo], upper


def _waves(m: int, limit: float, held: float) -> int:
    """ceil(m / k), k the microbatches a rank's limit lets it hold at once (each holds
    `held` from its F to its B)."""
    if held <= 0 or math.isinf(limit):
        return 1
    k = max(1, math.floor(limit / held + 1e-9))
    return math.ceil(m / k)


def all_cuts(num_layers: int, num_ranks: int) -> Iterator[Cut]:
    """Every contiguous cut of `num_layers` layers into `num_ranks` non-empty stages."""
    if num_ranks == 1:
        yield (num_layers,)
        return
    for first in range(1, num_layers - num_ranks + 2):
        for rest in all_cuts(num_layers - first, num_ranks - 1):
            yield (first, *rest)

