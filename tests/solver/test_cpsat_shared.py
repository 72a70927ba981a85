"""The order-literal model where two stages share a rank's memory (`solver.cpsat_shared`):
on tiny V pipelines every order of the model's family is simulated, so its "optimal"
must be the true optimum and its bound never above it."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

import pytest
from ppsched.solver.exact.cpsat import build_model, solve_cpsat, solve_cpsat_rising
from ppsched.solver.exact.cpsat_shared import applies, num_literals
from ppsched.solver.exact.frame import seed as seed_model
from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.ops import Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import simulate
from ppsched.solver.solving.pipeline import heuristic_orders

from tests.solver.test_v_relaxation import _extensions


def _v_case(m: int, seed: int, placement: str = "v", tightest: bool = False,
            p: int = 2) -> Problem:
    """A `p`-rank profile with small times in halves, latencies up to 4x the op times
    and m_w <= m_b, cut in two chunks, each rank's limit from what one microbatch of its
    two stages holds up to one and a half times that (`tightest`: the least)."""
    rng = random.Random(seed * 7919 + m)
    m_b = [rng.choice([1.0, 2.0]) for _ in range(p)]
    one = parse_profile({
        "num_ranks": p, "num_microbatches": m,
        "t_f": [rng.choice([0.5, 1.0, 1.5]) for _ in range(p)],
        "t_b": [rng.choice([0.5, 1.0, 2.0]) for _ in range(p)],
        "t_w": [rng.choice([0.5, 1.0, 2.0]) for _ in range(p)],
        "t_comm": [rng.choice([0.0, 0.5, 2.0]) for _ in range(p - 1)],
        "m_b": m_b, "m_w": [rng.choice([0.0, 0.5, 1.0]) * x for x in m_b]})
    cut = with_chunks(one, 2, placement).problem
    need = [sum(cut.m_b[s] for s in stages) for stages in cut.rank_to_stages]
    limit = [x * rng.choice([1.0, 1.25, 1.5]) for x in need]
    if tightest:
        limit = need
    data = with_chunks(one, 2, placement).model_dump(exclude_none=True)
    return parse_profile({**data, "memory_limit": limit}).problem


def _rank_orders(problem: Problem, rank: int, fifo: bool) -> Iterator[list[Op]]:
    """Every order of the rank's ops that keeps each microbatch's own order on the rank
    (F down the stages, B back up, W after its B), F in microbatch order per stage (every
    model's family), with `fifo` B and W too, and stays within the rank's limit."""
    stages = sorted(problem.rank_to_stages[rank])
    m = problem.num_microbatches
    before: dict[Op, list[Op]] = {}
    for j in range(m):
        for n, s in enumerate(stages):
            before[Op("F", s, j)] = [Op("F", stages[n - 1], j)] if n else []
            before[Op("B", s, j)] = [Op("B", stages[n + 1], j)] if n + 1 < len(stages) \
                else [Op("F", stages[-1], j)]
            before[Op("W", s, j)] = [Op("B", s, j)]
            for kind in ("F", "B", "W") if fifo else ("F",):
                if j:
                    before[Op(kind, s, j)].append(Op(kind, s, j - 1))
    # The orders the dependencies allow within the limit: the enumeration of the V
    # relaxation's exhaustive tests.
    yield from _extensions(list(before), before, problem, rank)


def _optimum(problem: Problem, fifo: bool) -> float:
    """The least cost over every valid schedule of the family, by simulating them all."""
    best = float("inf")
    for combo in itertools.product(*(list(_rank_orders(problem, r, fifo))
                                     for r in range(problem.num_ranks))):
        sim = simulate(problem, list(combo))
        if sim.ok and sim.metrics is not None:
            best = min(best, sim.metrics.cost)
    assert best < float("inf"), "no valid schedule: a bound held against it would pass vacuously"
    return best


def test_applies_to_two_chunks_where_memory_binds() -> None:
    problem = _v_case(2, 0)
    assert problem.num_chunks == 2 and applies(problem)
    assert num_literals(problem) > 0
    roomy = parse_profile({**with_chunks(parse_profile({
        "num_ranks": 2, "num_microbatches": 2, "t_f": 1.0, "t_b": 1.0, "t_w": 1.0,
        "t_comm": 0.0, "m_b": 1.0, "m_w": 0.5}), 2, "v").model_dump(exclude_none=True),
        "memory_limit": 100.0}).problem
    assert not applies(roomy)


@pytest.mark.parametrize(("p", "m", "seed", "fifo", "placement"),
                         [(2, 2, s, True, "v") for s in range(8)]
                         + [(2, 2, s, False, "v") for s in range(3)]
                         + [(2, 2, s, True, "loop") for s in range(3)]
                         # m = 3 on two ranks: millions of order pairs; on one rank (its
                         # two stages, the V's turn on itself) every order is simulated.
                         # (seed 3 has millions of orders on its one rank: left out).
                         + [(1, 3, s, True, "v") for s in range(3)]
                         + [(1, 3, s, False, "v") for s in range(2)])
def test_optimal_is_the_exhaustive_optimum(p: int, m: int, seed: int, fifo: bool,
                                           placement: str) -> None:
    problem = _v_case(m, seed, placement, p=p)
    assert applies(problem) or p == 1  # one rank: never below 1F1B, the literals still exact
    truth = _optimum(problem, fifo)
    hint = heuristic_orders(problem)[0]
    result = solve_cpsat(problem, hint, tight=True, fifo=fifo, workers=1, seed=0,
                         deterministic_s=20.0)
    assert result.status == "optimal"
    assert result.objective == pytest.approx(truth, abs=1e-6)
    assert result.bound <= truth + 1e-6


@pytest.mark.parametrize("seed", range(6))
def test_probes_never_bound_above_the_optimum(seed: int) -> None:
    problem = _v_case(2, seed)
    truth = _optimum(problem, True)
    hint = heuristic_orders(problem)[0]
    result = solve_cpsat_rising(problem, hint, workers=1, seed=0, deterministic_s=10.0)
    assert result.bound <= truth + 1e-6
    assert result.objective is not None and result.objective >= truth - 1e-6


@pytest.mark.parametrize("seed", range(4))
def test_the_hint_satisfies_the_literals(seed: int) -> None:
    """The model holds the heuristic's own schedule: its literals, memory rule and energy
    cuts are valid for a real schedule (a model that cut it off would be wrong)."""
    from ortools.sat.python import cp_model

    problem = _v_case(3, seed)
    hint = heuristic_orders(problem)[0]
    scaled, _, hint_ticks, upper = seed_model(problem, hint, "cost")
    built = build_model(problem, scaled, hint_ticks, upper, tight=True)
    for op, var in built.start.items():
        built.model.add(var == hint_ticks[op])
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = 5.0
    assert solver.solve(built.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
