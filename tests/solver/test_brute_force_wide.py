"""Exhaustive search on tiny pipelines far from the paper's: per-boundary latency up to 6x
the op times, fractional and per-rank limits, t_w = 0, m_w > m_b, and fused BW orders.

Every valid per-rank order (with each microbatch's backward split as B, W or fused as BW)
is simulated, so the optimum of the cost model is known; the heuristic (with its local
search) and the paper's algorithm are held against it.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from typing import Any

import pytest
from ppsched.solver.heuristic.paper import paper_zb
from ppsched.solver.model.ops import Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import memory_delta, simulate
from ppsched.solver.solving.pipeline import heuristic_orders

from tests.solver.test_brute_force import _interleavings


def _rank_orders(problem: Problem, rank: int) -> Iterator[list[Op]]:
    """The rank's orders (F before its backward per microbatch), split or fused, within
    the rank's memory limit."""
    m = problem.num_microbatches
    for fused in itertools.product((False, True), repeat=m):
        chains = [[Op("F", rank, j), Op("BW", rank, j)] if fused[j] else
                  [Op("F", rank, j), Op("B", rank, j), Op("W", rank, j)] for j in range(m)]
        for order in _interleavings(chains):
            prefix = itertools.accumulate(memory_delta(problem, op) for op in order)
            if all(x <= problem.memory_limit[rank] + 1e-9 for x in prefix):
                yield order


def _optimum(problem: Problem) -> float:
    best = float("inf")
    per_rank = [list(_rank_orders(problem, r)) for r in range(problem.num_ranks)]
    for combo in itertools.product(*per_rank):
        sim = simulate(problem, list(combo))
        if sim.ok and sim.metrics is not None:
            best = min(best, sim.metrics.cost)
    assert best < float("inf"), "no valid schedule: a bound held against it would pass vacuously"
    return best


def wide_case(p: int, m: int, seed: int) -> dict[str, Any]:
    """Fractional times (W may take none), per-boundary latency up to 6x the op times,
    m_w from 0 to 2 m_b, and no limit, a fractional scalar one or per-rank ones."""
    rng = random.Random(seed * 7919 + p * 10 + m)
    m_b = [rng.choice([0.5, 1.0, 1.5]) for _ in range(p)]
    m_w = [rng.choice([0.0, 0.5, 1.0, 2.0]) * x for x in m_b]
    need = max(m_b)
    limit: float | list[float] | None = rng.choice([
        None, round(need * rng.uniform(1.0, 2.5), 2),
        [round(x * rng.uniform(1.0, 2.5), 2) for x in m_b]])
    return {"num_ranks": p, "num_microbatches": m,
            "t_f": [rng.choice([0.25, 0.5, 1.0, 1.5]) for _ in range(p)],
            "t_b": [rng.choice([0.25, 0.5, 1.0, 2.0]) for _ in range(p)],
            "t_w": [rng.choice([0.0, 0.25, 1.0, 2.0]) for _ in range(p)],
            "t_comm": [rng.choice([0.0, 0.5, 2.0, 6.0]) for _ in range(p - 1)],
            "m_b": m_b, "m_w": m_w, "memory_limit": limit}


# Per rank, p = 2, m = 2 has at most 20 + 2*10 + 6 = 46 orders (fewer under a limit).
CASES = [(2, 2, seed) for seed in range(100)] + [(3, 1, seed) for seed in range(20)]
# The heuristic's worst ratio to the optimum on these cases, as measured: it finds the
# optimum on all of them (before fused-backward stages and the local search it missed
# by up to 1.33x).
WORST_RATIO = 1.0


@pytest.mark.parametrize(("p", "m", "seed"), CASES)
def test_heuristic_against_the_optimum(p: int, m: int, seed: int) -> None:
    problem = parse_profile(wide_case(p, m, seed)).problem
    optimum = _optimum(problem)
    assert optimum < float("inf")  # microbatch after microbatch with BW always fits
    orders, _, value = heuristic_orders(problem)
    sim = simulate(problem, orders)
    assert sim.ok and sim.metrics is not None
    assert sim.metrics.cost == pytest.approx(value)
    assert value >= optimum - 1e-9
    assert value <= optimum * WORST_RATIO + 1e-9
    paper = paper_zb(problem)
    if paper is not None:
        assert paper.cost >= optimum - 1e-9
        assert value <= paper.cost + 1e-9


def test_the_paper_builds_on_most_cases() -> None:
    # The paper comparison above runs only where its algorithm builds under the limit;
    # it builds on 99 of the 120 cases (measured), so it cannot go vacuous.
    built = sum(paper_zb(parse_profile(wide_case(p, m, seed)).problem) is not None
                for p, m, seed in CASES)
    assert built >= 90, f"the paper's algorithm builds on {built} of {len(CASES)} only"


def test_regression_case_optimum() -> None:
    # Issue 11's case found by exhaustive search: the optimum is 32.5.
    problem = parse_profile({
        "num_ranks": 2, "num_microbatches": 3, "t_f": [1, 0.25], "t_b": [1, 0.5],
        "t_w": [2, 0.25], "t_comm": [6], "m_b": [1, 0.5], "m_w": [0.3333, 0],
        "memory_limit": [2, 1.5]}).problem
    orders, _, value = heuristic_orders(problem)
    assert value == pytest.approx(32.5)
    sim = simulate(problem, orders)
    assert sim.ok and sim.metrics is not None
    # The bound proves it optimal (an exhaustive search here takes minutes).
    assert sim.metrics.lower_bound == pytest.approx(32.5)
