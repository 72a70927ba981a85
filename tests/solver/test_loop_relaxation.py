"""The two-chunk relaxation (`solver.v_relaxation`) on the loop placement: never above the
optimum of an exhaustive search over every valid schedule, and above the closed forms
where memory binds (issue 27: the default solve considers the loop cut, so the bound it
prints must cover it)."""

from __future__ import annotations

import itertools
import random

import pytest
from ppsched.solver.exact.v_relaxation import applies, memory_binds, v_rank_relaxation_bound
from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.ops import Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import memory_delta, simulate

from tests.solver.test_brute_force import _interleavings


def _loop_case(seed: int) -> Problem:
    """Two ranks, two microbatches, the loop cut of a one-chunk profile with small integer
    times and latencies, each rank's limit one microbatch's activations of its two stages
    (W holding half of them): the exhaustive search stays small."""
    rng = random.Random(seed)
    m_b = float(rng.choice([2, 4]))
    one = parse_profile({
        "num_ranks": 2, "num_microbatches": 2,
        "t_f": [float(rng.choice([1, 2, 3])) for _ in range(2)],
        "t_b": [float(rng.choice([1, 2, 4])) for _ in range(2)],
        "t_w": [float(rng.choice([0, 1, 2])) for _ in range(2)],
        "t_comm": [float(rng.choice([0, 1, 3]))], "m_b": m_b, "m_w": m_b / 2,
        "memory_limit": m_b})
    return with_chunks(one, 2, "loop").problem


def _rank_orders(problem: Problem, rank: int) -> list[list[Op]]:
    """Every order of the rank's ops its dependencies allow (F(a) before F(c) before
    B(c) before B(a), each W after its B), within its memory limit."""
    a, c = problem.rank_to_stages[rank]
    per_microbatch = []
    for j in range(problem.num_microbatches):
        fa, fc, bc, wc, ba, wa = (Op("F", a, j), Op("F", c, j), Op("B", c, j),
                                  Op("W", c, j), Op("B", a, j), Op("W", a, j))
        per_microbatch.append([[fa, fc, bc, wc, ba, wa], [fa, fc, bc, ba, wc, wa],
                               [fa, fc, bc, ba, wa, wc]])
    fits = []
    for chains in itertools.product(*per_microbatch):
        for order in _interleavings([list(chain) for chain in chains]):
            held = itertools.accumulate(memory_delta(problem, op) for op in order)
            if all(x <= problem.memory_limit[rank] + 1e-9 for x in held):
                fits.append(order)
    return fits


def _optimum(problem: Problem) -> float:
    best = float("inf")
    for combo in itertools.product(*(_rank_orders(problem, r) for r in range(2))):
        sim = simulate(problem, list(combo))
        if sim.ok and sim.metrics is not None:
            best = min(best, sim.metrics.cost)
    assert best < float("inf"), "no valid schedule: a bound held against it would pass vacuously"
    return best


@pytest.mark.parametrize("seed", range(10))
def test_never_above_the_exhaustive_optimum(seed: int) -> None:
    problem = _loop_case(seed)
    assert applies(problem) and problem.placement == "loop"
    optimum = _optimum(problem)
    for rank in range(2):
        assert v_rank_relaxation_bound(problem, rank, deterministic_s=2.0).bound \
            <= optimum + 1e-9


def test_beats_the_closed_forms_where_memory_binds() -> None:
    # Not a bound of 0 that passes the test above: where a rank's limit binds, the
    # relaxation sees the microbatches pass one at a time, which the closed forms do not.
    gains = []
    for seed in range(10):
        problem = _loop_case(seed)
        ranks = [r for r in range(2) if memory_binds(problem, r)]
        if ranks:
            bound = max(v_rank_relaxation_bound(problem, r, deterministic_s=2.0).bound
                        for r in ranks)
            gains.append(bound - lower_bound(problem))
    assert len(gains) >= 3 and max(gains) > 0.5
