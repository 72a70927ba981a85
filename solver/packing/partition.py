"""Partitioning weighted items into bins: Karmarkar-Karp, a refinement pass, an exact search
for tiny cases, and the naive fill-to-the-cap packing it is compared with.

An item has a weight (its cost, balanced across bins) and a size (its tokens, bounded by
each bin's capacity). The objective is the heaviest bin's weight: the slowest replica (or
microbatch) sets the step time. Pure Python; no dependency.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections.abc import Sequence

Bins = list[list[int]]
"""Item indices per bin."""

# Above this many items the exact search is not tried (its worst case is k**n).
EXACT_MAX_ITEMS = 10
# Refinement stops after this many improving moves (each lowers the heaviest bin or
# repairs a capacity; the bound only guards against a float tie that cycles).
MAX_REFINE_STEPS = 100_000


def karmarkar_karp(weights: Sequence[float], k: int) -> Bins:
    """The k-way largest differencing method (Karmarkar and Karp 1982).

    Every item starts as a k-tuple of bin sums ``(w, 0, ..., 0)``; the two tuples of
    largest spread (max - min) are merged, the heaviest bin of one with the lightest of the
    other, until one tuple is left. Sizes are ignored here; `refine` repairs capacities.

    Returns:
        ``k`` bins of item indices (some empty when there are fewer than ``k`` items).
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    counter = itertools.count()
    # Heap entries: (-spread, tie-break, [(sum, items), ...] sorted by sum, heaviest first).
    heap: list[tuple[float, int, list[tuple[float, list[int]]]]] = []
    for i, w in enumerate(weights):
        parts = [(float(w), [i])] + [(0.0, []) for _ in range(k - 1)]
        heapq.heappush(heap, (-float(w), next(counter), parts))
    if not heap:
        return [[] for _ in range(k)]
    while len(heap) > 1:
        _, _, a = heapq.heappop(heap)
        _, _, b = heapq.heappop(heap)
        # Heaviest of a with lightest of b: the differencing step.
        merged = [(sa + sb, ia + ib) for (sa, ia), (sb, ib) in zip(a, reversed(b), strict=True)]
        merged.sort(key=lambda part: -part[0])
        heapq.heappush(heap, (-(merged[0][0] - merged[-1][0]), next(counter), merged))
    return [sorted(items) for _, items in heap[0][2]]


def refine(bins: Bins, weights: Sequence[float], sizes: Sequence[float],
           capacity: Sequence[float], *, moves: bool = True) -> Bins | None:
    """Repair capacities, then lower the heaviest bin by moving or swapping single items.

    Args:
        bins: the starting assignment (not modified).
        weights: each item's weight.
        sizes: each item's size.
        capacity: each bin's largest total size.
        moves: allow moving one item (bins change counts); False keeps every bin's count
            (swaps only).

    Returns:
        The refined bins, or None when a capacity cannot be repaired by these steps.
    """
    bins = [list(b) for b in bins]
    k = len(bins)
    load = [math.fsum(weights[i] for i in b) for b in bins]
    used = [math.fsum(sizes[i] for i in b) for b in bins]
    if not _repair(bins, load, used, weights, sizes, capacity, moves):
        return None
    for _ in range(MAX_REFINE_STEPS):
        h = max(range(k), key=lambda x: load[x])
        best: tuple[float, int, int, int | None] | None = None  # (new max, l, x, y)
        for low in sorted(range(k), key=lambda x: load[x]):
            if low == h or load[low] >= load[h]:
                continue
            gap = load[h] - load[low]
            for x in bins[h]:
                if moves and 0 < weights[x] < gap and used[low] + sizes[x] <= capacity[low]:
                    new = max(load[h] - weights[x], load[low] + weights[x])
                    if best is None or new < best[0]:
                        best = (new, low, x, None)
            # Swaps: y from `low` as close as possible to weights[x] - gap / 2.
            others = sorted(bins[low], key=lambda y: weights[y])
            keys = [weights[y] for y in others]
            for x in bins[h]:
                target = weights[x] - gap / 2
                at = bisect.bisect_left(keys, target)
                for y in others[max(0, at - 2):at + 2]:
                    delta = weights[x] - weights[y]
                    if not 0 < delta < gap:
                        continue
                    if (used[h] - sizes[x] + sizes[y] > capacity[h]
                            or used[low] + sizes[x] - sizes[y] > capacity[low]):
                        continue
                    new = max(load[h] - delta, load[low] + delta)
                    if best is None or new < best[0]:
                        best = (new, low, x, y)
        if best is None or best[0] >= load[h] * (1 - 1e-12):
            break
        _, low, x, swap = best
        _move(bins, load, used, weights, sizes, x, h, low)
        if swap is not None:
            _move(bins, load, used, weights, sizes, swap, low, h)
    return [sorted(b) for b in bins]


def _move(bins: Bins, load: list[float], used: list[float], weights: Sequence[float],
          sizes: Sequence[float], item: int, src: int, dst: int) -> None:
    bins[src].remove(item)
    bins[dst].append(item)
    load[src] -= weights[item]
    load[dst] += weights[item]
    used[src] -= sizes[item]
    used[dst] += sizes[item]


def _repair(bins: Bins, load: list[float], used: list[float], weights: Sequence[float],
            sizes: Sequence[float], capacity: Sequence[float], moves: bool) -> bool:
    """Bring every bin within its capacity (best move by resulting weight, else a swap)."""
    k = len(bins)
    for _ in range(MAX_REFINE_STEPS):
        over = [b for b in range(k) if used[b] > capacity[b]]
        if not over:
            return True
        src = over[0]
        best: tuple[float, int, int, int | None] | None = None
        for x in bins[src]:
            for dst in range(k):
                if dst == src:
                    continue
                if moves and used[dst] + sizes[x] <= capacity[dst]:
                    new = load[dst] + weights[x]
                    if best is None or new < best[0]:
                        best = (new, dst, x, None)
                if best is not None and best[3] is None:
                    continue  # a plain move exists: prefer it to any swap
                for y in bins[dst]:
                    if sizes[y] >= sizes[x] or used[dst] - sizes[y] + sizes[x] > capacity[dst]:
                        continue
                    new = load[dst] + weights[x] - weights[y]
                    if best is None or (best[3] is not None and new < best[0]):
                        best = (new, dst, x, y)
        if best is None:
            return False
        _, dst, x, swap = best
        _move(bins, load, used, weights, sizes, x, src, dst)
        if swap is not None:
            _move(bins, load, used, weights, sizes, swap, dst, src)
    return False


def exact_partition(weights: Sequence[float], sizes: Sequence[float],
                    capacity: Sequence[float], counts: Sequence[int] | None = None
                    ) -> Bins | None:
    """The assignment of least heaviest bin, by depth-first branch and bound (tiny cases).

    Args:
        weights, sizes: per item.
        capacity: per bin.
        counts: each bin's exact item count, or None for any count.

    Returns:
        The optimal bins, or None when no assignment respects the capacities (and counts).
    """
    n, k = len(weights), len(capacity)
    order = sorted(range(n), key=lambda i: -weights[i])
    load, used = [0.0] * k, [0.0] * k
    held = [0] * k
    assign = [-1] * n
    best: list[float | list[int]] = [math.inf, []]

    def dfs(pos: int) -> None:
        if pos == n:
            if counts is not None and list(held) != list(counts):
                return
            worst = max(load)
            if worst < best[0]:  # type: ignore[operator]
                best[0], best[1] = worst, list(assign)
            return
        i = order[pos]
        seen: set[tuple[float, float, int, float]] = set()
        for b in range(k):
            # Bins alike so far (same load, use, count and capacity) are interchangeable.
            key = (load[b], used[b], held[b], capacity[b])
            if key in seen:
                continue
            seen.add(key)
            if used[b] + sizes[i] > capacity[b]:
                continue
            if counts is not None and held[b] >= counts[b]:
                continue
            if load[b] + weights[i] >= best[0]:  # type: ignore[operator]
                continue
            load[b] += weights[i]
            used[b] += sizes[i]
            held[b] += 1
            assign[i] = b
            dfs(pos + 1)
            load[b] -= weights[i]
            used[b] -= sizes[i]
            held[b] -= 1
        assign[i] = -1

    dfs(0)
    if best[0] == math.inf:
        return None
    bins: Bins = [[] for _ in range(k)]
    for i, b in enumerate(best[1]):  # type: ignore[arg-type]
        bins[b].append(i)
    return bins


def balanced_partition(weights: Sequence[float], sizes: Sequence[float],
                       capacity: Sequence[float]) -> Bins | None:
    """Items into ``len(capacity)`` bins, heaviest bin as light as found, capacities kept.

    Exact for at most `EXACT_MAX_ITEMS` items; else Karmarkar-Karp (on weights) followed by
    `refine` (capacity repair, then moves and swaps that lower the heaviest bin).

    Returns:
        The bins, or None when no assignment within the capacities was found.
    """
    if len(weights) <= EXACT_MAX_ITEMS:
        return exact_partition(weights, sizes, capacity)
    return refine(karmarkar_karp(weights, len(capacity)), weights, sizes, capacity)


def deal_with_counts(weights: Sequence[float], counts: Sequence[int]) -> Bins:
    """Items into bins of exactly ``counts[b]`` items each, sums balanced.

    Heaviest item first, each to the bin of least sum relative to its count that still
    has a free place (longest processing time with slots), then count-keeping swaps.
    """
    if sum(counts) != len(weights):
        raise ValueError(f"counts {list(counts)} do not sum to {len(weights)} items")
    k = len(counts)
    bins: Bins = [[] for _ in range(k)]
    load = [0.0] * k
    for i in sorted(range(len(weights)), key=lambda i: -weights[i]):
        free = [b for b in range(k) if len(bins[b]) < counts[b]]
        b = min(free, key=lambda b: (load[b] / counts[b], b))
        bins[b].append(i)
        load[b] += weights[i]
    unlimited = [math.inf] * k
    refined = refine(bins, weights, [0.0] * len(weights), unlimited, moves=False)
    assert refined is not None, "no capacity to repair"
    return refined


def fill_in_order(sizes: Sequence[float], cap: float) -> Bins:
    """The naive packing: items in arrival order, a new bin whenever the next would
    overflow the cap."""
    bins: Bins = []
    room = 0.0
    for i, s in enumerate(sizes):
        if not bins or s > room:
            bins.append([])
            room = cap
        bins[-1].append(i)
        room -= s
    return bins


def split_in_order(sizes: Sequence[float], cap: float, count: int) -> Bins | None:
    """Items in arrival order into ``count`` consecutive bins: filled to the cap
    (`fill_in_order`, the fewest consecutive bins there are), then the largest bin of
    two or more items cut in two at its middle until there are ``count``. Fewer bins when
    every bin holds one item; None when arrival order needs more than ``count`` bins.

    The naive packing of a user who fixed the number of microbatches: the order is kept
    and no bin passes the cap.
    """
    bins = fill_in_order(sizes, cap)
    if len(bins) > count:
        return None
    held = [math.fsum(sizes[i] for i in b) for b in bins]
    while len(bins) < count:
        splittable = [k for k, b in enumerate(bins) if len(b) > 1]
        if not splittable:
            break
        k = max(splittable, key=lambda k: (held[k], -k))
        items = bins[k]
        prefix = list(itertools.accumulate(sizes[i] for i in items))
        # The cut leaving the first part nearest half the bin, an item on each side.
        cut = min(range(1, len(items)), key=lambda j: abs(prefix[j - 1] - held[k] / 2))
        first = math.fsum(sizes[i] for i in items[:cut])
        bins[k:k + 1] = [items[:cut], items[cut:]]
        held[k:k + 1] = [first, held[k] - first]
    return bins
