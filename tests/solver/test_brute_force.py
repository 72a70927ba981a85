"""Exhaustive search on tiny pipelines: every valid per-rank order is simulated, so the true
optimum of the cost model (DESIGN.md section 3) is known and the lower bounds and the
heuristic can be held against it."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from ppsched.solver.heuristic.search import zb_heuristic
from ppsched.solver.model.ops import Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import memory_delta, simulate


def _interleavings(chains: list[list[Op]]) -> Iterator[list[Op]]:
    """Every merge of the chains that keeps each chain's order."""
    chains = [chain for chain in chains if chain]
    if not chains:
        yield []
        return
    for i, chain in enumerate(chains):
        rest = [*chains[:i], chain[1:], *chains[i + 1:]]
        for tail in _interleavings(rest):
            yield [chain[0], *tail]


def _rank_orders(problem: Problem, rank: int) -> list[list[Op]]:
    """The rank's orders with F before B before W per microbatch (any other order
    deadlocks), pruned to those within the rank's memory limit."""
    stage = rank  # one chunk: rank r runs stage r
    chains = [[Op("F", stage, j), Op("B", stage, j), Op("W", stage, j)]
              for j in range(problem.num_microbatches)]
    fits = []
    for order in _interleavings(chains):
        prefix = itertools.accumulate(memory_delta(problem, op) for op in order)
        if all(x <= problem.memory_limit[rank] + 1e-9 for x in prefix):
            fits.append(order)
    return fits


@dataclass(frozen=True)
class Optimum:
    cost: float
    makespan: float
    bound: float  # the lower bound the simulator reports
    num_valid: int
    orders: frozenset[tuple[tuple[Op, ...], ...]]


def _brute_force(problem: Problem) -> Optimum:
    cost = makespan = float("inf")
    bound = 0.0
    valid = set()
    for combo in itertools.product(*(_rank_orders(problem, r)
                                     for r in range(problem.num_ranks))):
        sim = simulate(problem, list(combo))
        if not sim.ok:
            continue  # deadlocks: a B waits for a B queued behind an F that waits
        assert sim.metrics is not None
        valid.add(tuple(tuple(ops) for ops in combo))
        cost = min(cost, sim.metrics.cost)
        makespan = min(makespan, sim.metrics.makespan)
        bound = sim.metrics.lower_bound
    return Optimum(cost, makespan, bound, len(valid), frozenset(valid))


def _case(p: int, m: int, seed: int) -> dict[str, Any]:
    """Small integer times (W may take no time), t_comm 0 or 1, and no memory limit,
    the tightest one (each rank's m_b) or one unit more."""
    rng = random.Random(seed * 1000 + p * 10 + m)
    m_b = [rng.randint(1, 2) for _ in range(p)]
    memory = rng.choice(["none", "tight", "tight", "plus-one"])
    limit: float | list[float] | None = None
    if memory == "tight":
        limit = [float(x) for x in m_b]
    elif memory == "plus-one":
        limit = max(m_b) + 1.0
    return {
        "name": f"p{p}-m{m}-seed{seed}", "num_ranks": p, "num_microbatches": m,
        "t_f": [rng.randint(1, 3) for _ in range(p)],
        "t_b": [rng.randint(1, 3) for _ in range(p)],
        "t_w": [rng.randint(0, 3) for _ in range(p)],
        "t_comm": rng.choice([0.0, 1.0]), "m_b": m_b,
        "m_w": [rng.choice([0.0, x / 2, float(x)]) for x in m_b], "memory_limit": limit,
    }


# (p, m, seeds, slow): the tiny shapes searched in full. With one microbatch each rank
# has a single order (F, B, W); p = 3, m = 2 has up to 20**3 combinations a case; p = 2,
# m = 3 has 1680**2 without a limit, so only seeds whose limit prunes it below ~20,000.
SHAPES = [(2, 1, range(8), False), (2, 2, range(40), False), (3, 1, range(8), False),
          (4, 1, range(4), False), (3, 2, range(6), False), (3, 2, range(6, 60), True),
          (2, 3, (1, 2, 5, 8, 11, 13), True)]
CASES = [pytest.param(p, m, seed, id=f"p{p}-m{m}-seed{seed}",
                      marks=[pytest.mark.slow] if slow else [])
         for p, m, seeds, slow in SHAPES for seed in seeds]


@pytest.mark.parametrize(("p", "m", "seed"), CASES)
def test_optimum_against_bounds_and_heuristic(p: int, m: int, seed: int) -> None:
    problem = parse_profile(_case(p, m, seed)).problem
    best = _brute_force(problem)
    assert best.num_valid > 0  # running microbatches one by one always fits
    # No order beats the bounds.
    assert best.cost >= problem.simple_lower_bound - 1e-9
    assert best.cost >= best.bound - 1e-9
    assert best.makespan >= best.cost - 1e-9
    # The heuristic's orders are among the valid ones; on every tiny case tried (here
    # and 500 more seeds while writing this test) it finds the optimum, by cost and by
    # makespan.
    build = zb_heuristic(problem)
    assert tuple(tuple(ops) for ops in build.orders) in best.orders
    assert build.cost >= best.cost - 1e-9
    assert build.cost == pytest.approx(best.cost, abs=1e-9)
    by_makespan = zb_heuristic(problem, objective="makespan")
    assert by_makespan.makespan == pytest.approx(best.makespan, abs=1e-9)


def test_enumeration_counts() -> None:
    # Two chains of three ops merge in C(6, 3) = 20 ways per rank; with no memory limit
    # every one fits, and a limit of one m_b leaves only microbatch after microbatch
    # (m_w = m_b: the W must free it before the next F).
    data = {"num_ranks": 2, "num_microbatches": 2, "t_f": 1.0, "t_b": 1.0, "t_w": 1.0,
            "m_b": 1.0, "m_w": 1.0}
    free = parse_profile(data).problem
    assert len(_rank_orders(free, 0)) == 20
    tight = parse_profile({**data, "memory_limit": 1.0}).problem
    assert [[str(op) for op in o] for o in _rank_orders(tight, 0)] == [
        ["0F0", "0B0", "0W0", "0F1", "0B1", "0W1"],
        ["0F1", "0B1", "0W1", "0F0", "0B0", "0W0"],
    ]
    # Both ranks must take the microbatches in the same order, or they deadlock.
    assert _brute_force(tight).num_valid == 2


def test_known_optimum_by_hand() -> None:
    # p = 2, m = 2, unit times, no latency, no limit: the busiest rank needs 6 and the
    # last rank cannot start before 1, nor the first rank's first B before 3, so the
    # first rank idles at least 1 (F0 F1 . B0 W0 B1 W1): the optimum is 7.
    problem = parse_profile({"num_ranks": 2, "num_microbatches": 2, "t_f": 1.0,
                             "t_b": 1.0, "t_w": 1.0, "m_b": 1.0, "m_w": 1.0}).problem
    best = _brute_force(problem)
    assert best.cost == 7.0
    assert zb_heuristic(problem).cost == 7.0
