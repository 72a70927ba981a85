"""The partition algorithms: Karmarkar-Karp on known instances, the refinement pass, the
exact search against brute force, caps and counts kept."""

from __future__ import annotations

import itertools
import random

import pytest
from ppsched.solver.packing.partition import (
    balanced_partition,
    deal_with_counts,
    exact_partition,
    fill_in_order,
    karmarkar_karp,
    refine,
    split_in_order,
)


def _sums(bins, weights):
    return sorted(sum(weights[i] for i in b) for b in bins)


def _brute_force(weights, sizes, capacity):
    """The least heaviest bin over every assignment within the capacities (inf: none)."""
    best = float("inf")
    k = len(capacity)
    for assign in itertools.product(range(k), repeat=len(weights)):
        load, used = [0.0] * k, [0.0] * k
        for i, b in enumerate(assign):
            load[b] += weights[i]
            used[b] += sizes[i]
        if all(u <= c for u, c in zip(used, capacity, strict=True)):
            best = min(best, max(load))
    return best


def test_kk_two_way_classic_instance():
    # Karmarkar-Karp's textbook example: LDM leaves a difference of 2 on {8,7,6,5,4}
    # (8-7, 6-5, 4-1-1, 3-1), although {8,7} / {6,5,4} is perfect.
    weights = [8, 7, 6, 5, 4]
    bins = karmarkar_karp(weights, 2)
    assert _sums(bins, weights) == [14, 16]
    assert sorted(i for b in bins for i in b) == list(range(5))
    # The refinement pass (a swap) closes the gap to the optimum.
    refined = refine(bins, weights, [1] * 5, [10, 10])
    assert _sums(refined, weights) == [15, 15]


def test_kk_three_way_instance():
    weights = [10, 9, 8, 7, 6, 5, 4, 3, 2, 1]  # total 55: best heaviest bin 19
    bins = karmarkar_karp(weights, 3)
    assert sorted(i for b in bins for i in b) == list(range(10))
    assert max(_sums(bins, weights)) <= 20
    assert max(_sums(refine(bins, weights, [0] * 10, [1] * 3), weights)) == 19


def test_kk_fewer_items_than_bins_and_none():
    assert sorted(map(len, karmarkar_karp([3.0, 1.0], 4))) == [0, 0, 1, 1]
    assert karmarkar_karp([], 3) == [[], [], []]


@pytest.mark.parametrize("seed", range(25))
def test_exact_partition_equals_brute_force(seed):
    rng = random.Random(seed)
    n, k = rng.randint(1, 7), rng.randint(1, 3)
    weights = [rng.choice([1, 2, 3, 5, 8, 13]) * rng.random() + 0.1 for _ in range(n)]
    sizes = [rng.randint(1, 10) for _ in range(n)]
    capacity = [rng.randint(8, 25) for _ in range(k)]
    expected = _brute_force(weights, sizes, capacity)
    bins = exact_partition(weights, sizes, capacity)
    if expected == float("inf"):
        assert bins is None
        return
    assert bins is not None
    assert max(sum(weights[i] for i in b) for b in bins) == pytest.approx(expected)
    for b, cap in zip(bins, capacity, strict=True):
        assert sum(sizes[i] for i in b) <= cap


@pytest.mark.parametrize("seed", range(10))
def test_balanced_partition_small_cases_are_optimal(seed):
    rng = random.Random(100 + seed)
    n = rng.randint(4, 8)
    weights = [float(rng.randint(1, 30)) for _ in range(n)]
    sizes = [float(rng.randint(1, 9)) for _ in range(n)]
    capacity = [20.0, 20.0, 20.0]
    bins = balanced_partition(weights, sizes, capacity)
    assert max(sum(weights[i] for i in b) for b in bins) == _brute_force(weights, sizes,
                                                                         capacity)


@pytest.mark.parametrize("seed", range(10))
def test_balanced_partition_large_keeps_caps_and_items(seed):
    rng = random.Random(seed)
    lengths = [min(4000, max(1, int(rng.lognormvariate(6.5, 1.0)))) for _ in range(400)]
    weights = [1e-4 * s * s + s for s in lengths]
    cap = 4096
    k = -(-sum(lengths) // cap) + 2
    bins = balanced_partition(weights, lengths, [cap] * k)
    assert bins is not None
    assert sorted(i for b in bins for i in b) == list(range(400))
    assert all(sum(lengths[i] for i in b) <= cap for b in bins)
    # Far better balanced than filling in order with the same number of bins.
    loads = [sum(weights[i] for i in b) for b in bins]
    naive = [sum(weights[i] for i in b) for b in fill_in_order(lengths, cap)]
    assert max(loads) <= max(naive)


def test_cap_repair_moves_samples_out_of_full_bins():
    weights = [1.0, 1.0, 1.0, 1.0]
    sizes = [6, 6, 6, 1]
    # Karmarkar-Karp on equal weights pairs the big ones; only {6}, {6,1}... fit 7.
    bins = refine([[0, 1], [2, 3]], weights, sizes, [7, 13])
    assert bins is not None
    assert all(sum(sizes[i] for i in b) <= cap for b, cap in zip(bins, [7, 13], strict=True))
    assert refine([[0, 1], [2]], [1.0] * 3, [6, 6, 6], [7, 7]) is None


def test_deal_with_counts_keeps_counts_and_balances():
    weights = [9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0]
    bins = deal_with_counts(weights, [4, 4])
    assert sorted(map(len, bins)) == [4, 4]
    assert _sums(bins, weights) == [22, 22]
    uneven = deal_with_counts(weights, [2, 6])
    assert [len(b) for b in uneven] == [2, 6]
    with pytest.raises(ValueError):
        deal_with_counts(weights, [3, 3])


def test_fill_in_order():
    assert fill_in_order([3, 3, 3, 5, 1], 6) == [[0, 1], [2], [3, 4]]
    assert fill_in_order([6], 6) == [[0]]


def test_split_in_order_known_cases():
    # Filled to the cap: [0, 1] [2] [3]; a fourth bin cuts the largest, [0, 1], in two.
    assert split_in_order([4, 4, 4, 8], 10, 3) == [[0, 1], [2], [3]]
    assert split_in_order([4, 4, 4, 8], 10, 4) == [[0], [1], [2], [3]]
    # More bins than items: one item each.
    assert split_in_order([4, 4, 4, 8], 10, 6) == [[0], [1], [2], [3]]
    # Arrival order cannot make two within the cap.
    assert split_in_order([4, 4, 4, 8], 10, 2) is None
    # The cut nearest half: 1 + 2 | 3 of 6.
    assert split_in_order([1, 2, 3], 10, 2) == [[0, 1], [2]]


@pytest.mark.parametrize("seed", range(40))
def test_split_in_order_keeps_order_cap_and_count(seed):
    rng = random.Random(seed)
    cap = rng.randint(5, 20)
    sizes = [rng.randint(1, cap) for _ in range(rng.randint(1, 12))]
    count = rng.randint(1, 14)
    bins = split_in_order(sizes, cap, count)
    # Brute force: the fewest consecutive bins within the cap (greedy filling is optimal
    # for consecutive bins, so None exactly when that many exceed the count).
    fewest = min(len(cuts) + 1 for r in range(len(sizes))
                 for cuts in itertools.combinations(range(1, len(sizes)), r)
                 if all(sum(sizes[a:b]) <= cap for a, b in
                        zip((0, *cuts), (*cuts, len(sizes)), strict=True)))
    if fewest > count:
        assert bins is None
        return
    assert bins is not None
    assert [i for b in bins for i in b] == list(range(len(sizes)))  # order kept, all once
    assert all(b and sum(sizes[i] for i in b) <= cap for b in bins)
    assert len(bins) == min(count, len(sizes))


def test_entry_orders():
    from ppsched.solver.packing.plan import entry_orders

    costs = [5.0, 1.0, 3.0, 2.0, 4.0]
    orders = entry_orders(costs)
    assert orders[0] == [0, 4, 2, 3, 1]  # costliest first
    assert orders[1] == [1, 3, 2, 4, 0]  # cheapest first
    assert [costs[j] for j in orders[2]] == [1.0, 3.0, 5.0, 4.0, 2.0]  # cheap at both ends
    assert all(sorted(o) == list(range(5)) for o in orders)
    assert entry_orders([1.0, 1.0]) == [[1, 0], [0, 1]]
    assert entry_orders([7.0]) == [[0]]
