"""ppsched's packing as a search by step time: each candidate assignment keeps the cap,
the counts and every sample once; the search never loses to naive packing run with the
same method; a rebalancing move is kept only when it shortens the step."""

from __future__ import annotations

import pytest
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.packing import (
    PackSpec,
    best_packing,
    fill_samples,
    naive_samples,
    pack,
    rebalance,
    solve_replicas,
    split_replicas,
)
from ppsched.solver.packing.partition import Bins
from ppsched.solver.packing.synthetic import lognormal
from ppsched.solver.solving.entry import solve

from tests.solver.packing.test_pack import COST, base


def assert_assignment(groups: list[Bins], lengths: list[int], cap: int,
                      counts: list[int]) -> None:
    placed = sorted(i for g in groups for mb in g for i in mb)
    assert placed == list(range(len(lengths)))
    assert [len(g) for g in groups] == counts
    for g in groups:
        for mb in g:
            assert mb and sum(lengths[i] for i in mb) <= cap


def test_fill_samples_is_first_fit_decreasing_within_each_replica() -> None:
    lengths = lognormal(120, seed=5, max_tokens=8192)
    counts = list(PackSpec(lengths=tuple(lengths), cap=8192, num_replicas=2).counts())
    groups = fill_samples(lengths, COST, 8192, counts,
                          split_replicas(lengths, COST, 8192, counts))
    assert groups is not None
    assert_assignment(groups, lengths, 8192, counts)
    for g in groups:
        # First-fit decreasing: no sample of a later-opened microbatch would have fit an
        # earlier one when it was placed, so every microbatch but the lightest few is
        # at least half full (two half-empty ones would have merged).
        tokens = sorted((sum(lengths[i] for i in mb) for mb in g), reverse=True)
        assert sum(1 for t in tokens if t <= 8192 // 2) <= 1 + sum(
            1 for mb in g if len(mb) == 1)


def test_fill_samples_refuses_when_the_counts_are_too_few() -> None:
    # Four samples of 6000 tokens cannot share 8192-token microbatches: 4 are needed.
    assert fill_samples([6000] * 4, COST, 8192, [3], [[0, 1, 2, 3]]) is None
    assert fill_samples([6000] * 4, COST, 8192, [3], None) is None  # no replica split


@pytest.mark.parametrize("method", ["heuristic", "1f1b"])
@pytest.mark.parametrize("seed", range(4))
def test_pack_is_never_slower_than_naive_packing(method: str, seed: int) -> None:
    lengths = lognormal(160, seed=seed, max_tokens=8192)
    spec = PackSpec(lengths=tuple(lengths), cap=8192, num_replicas=2, cost=COST,
                    method=method)
    result = pack(base(), spec)
    assert result.packed.step_time <= result.naive.step_time + 1e-9
    assert result.packed.strategy in ("balanced", "fill", "arrival")
    groups = result.packed.groups()
    # The arrival assignment deals naive packing's microbatches in turn: a replica may
    # get one fewer than the others (the counts were left to ppsched).
    counts = [len(g) for g in groups] if result.packed.strategy == "arrival" \
        else list(spec.counts())
    assert all(c <= n for c, n in zip(counts, spec.counts(), strict=True))
    assert_assignment(groups, lengths, 8192, counts)


def test_naive_packing_runs_in_arrival_order() -> None:
    lengths = lognormal(80, seed=2, max_tokens=8192)
    spec = PackSpec(lengths=tuple(lengths), cap=8192, num_replicas=2, cost=COST)
    naive = pack(base(), spec).naive
    for replica in naive.replicas:
        assert replica.microbatch_order is None
        firsts = [mb.samples[0] for mb in replica.microbatches]
        assert firsts == sorted(firsts)


def test_keep_order_solves_in_the_profiles_order() -> None:
    profile = parse_profile({"num_ranks": 4, "num_microbatches": 8, "t_f": 1.0, "t_b": 1.0,
                             "t_w": 1.0, "m_b": 1.0, "m_w": 0.5,
                             "microbatches": [{"scale": x} for x in (4, 1, 1, 1, 1, 1, 1, 4)]})
    chosen = solve(profile, "heuristic")
    kept = solve(profile, "heuristic", keep_order=True)
    assert kept.microbatch_order is None
    assert chosen.microbatch_order is not None  # the long ones at the ends cost more
    assert chosen.metrics is not None and kept.metrics is not None
    assert chosen.metrics.cost < kept.metrics.cost


def test_rebalance_moves_work_off_the_slowest_replica_only_when_the_step_falls() -> None:
    # Replica 0 holds most of the work: a move must shorten the step.
    lengths = [4000, 3000, 3000, 2000, 2000, 1500, 1500, 1000, 900, 800, 700, 600, 500]
    groups: list[Bins] = [[[0, 7], [1, 8], [2, 9], [3, 10]], [[4, 11], [5, 12], [6]]]
    spec = PackSpec(lengths=tuple(lengths), cap=8192, num_replicas=2, cost=COST,
                    microbatches=(4, 3))
    start = solve_replicas("packed", base(p=2), groups, spec, "heuristic",
                           choose_order=True, strategy="balanced")
    moved = rebalance(base(p=2), spec, start, max_moves=4)
    assert moved.moves >= 1
    assert moved.step_time < start.step_time
    assert_assignment(moved.groups(), lengths, 8192, [4, 3])
    # No move at all when it cannot help: one replica.
    alone = solve_replicas("packed", base(p=2), [groups[0]], spec, "heuristic",
                           choose_order=True)
    assert rebalance(base(p=2), spec, alone, max_moves=4).moves == 0


def test_best_packing_keeps_the_fastest_candidate() -> None:
    lengths = lognormal(160, seed=7, max_tokens=8192)
    spec = PackSpec(lengths=tuple(lengths), cap=8192, num_replicas=2, cost=COST)
    best = best_packing(base(), spec)
    arrival = solve_replicas("packed", base(), naive_samples(lengths, 8192, 2), spec,
                             "heuristic", choose_order=True)
    assert best.step_time <= arrival.step_time + 1e-9
    assert best.to_dict()["strategy"] == best.strategy
    assert best.to_dict()["moves"] == best.moves
