"""The MILP backend (solver/exact/milp.py) held against exhaustive search and CP-SAT on tiny
pipelines: same optimum, proven, never worse than its hint; infeasible limits, unknown
solvers and oversized problems answered as the contract says."""

from __future__ import annotations

import dataclasses
import math
from functools import cache
from typing import Any

import pulp
import pytest
from ppsched.solver.exact.cpsat import solve_cpsat
from ppsched.solver.exact.frame import Orders, hint_timing, scale
from ppsched.solver.exact.milp import MAX_OPS, build_milp, solve_milp
from ppsched.solver.heuristic.search import zb_heuristic
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.ops import Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import simulate

from tests.solver.test_brute_force import Optimum, _brute_force, _case

OBJECTIVES = ("cost", "makespan")


def _problem(p: int, m: int, seed: int, positive: bool = False) -> Problem:
    """`_case(p, m, seed)`; `positive` gives every zero-time W one time unit."""
    data: dict[str, Any] = _case(p, m, seed)
    if positive:
        data["t_w"] = [max(1, x) for x in data["t_w"]]
    return parse_profile(data).problem


@cache
def _optimum(p: int, m: int, seed: int, positive: bool = False) -> Optimum:
    return _brute_force(_problem(p, m, seed, positive))


def _sequential(problem: Problem) -> Orders:
    """A poor but always valid hint: one microbatch at a time through the whole pipeline
    (fits any limit the profile accepts, since each rank holds one microbatch at most)."""
    orders: Orders = [[] for _ in range(problem.num_ranks)]
    for j in range(problem.num_microbatches):
        for s in range(problem.num_stages):
            orders[problem.stage_to_rank[s]].append(Op("F", s, j))
        for s in reversed(range(problem.num_stages)):
            orders[problem.stage_to_rank[s]] += [Op("B", s, j), Op("W", s, j)]
    return orders


def _objective(problem: Problem, orders: Orders, objective: str) -> float:
    sim = simulate(problem, orders)
    assert sim.ok and sim.metrics is not None
    return sim.metrics.objective(objective)


def _has_zero_time_op(problem: Problem) -> bool:
    return min(*problem.t_f, *problem.t_b, *problem.t_w) == 0


# (p, m, seeds, slow): shapes the brute force searches in well under a second a case.
SHAPES = [(2, 1, range(4), False), (2, 2, range(12), False), (3, 1, range(4), False),
          (3, 2, range(6), False), (3, 2, range(6, 16), True),
          (2, 3, (1, 2, 5, 8, 11, 13), True)]
CASES = [pytest.param(p, m, seed, id=f"p{p}-m{m}-seed{seed}",
                      marks=[pytest.mark.slow] if slow else [])
         for p, m, seeds, slow in SHAPES for seed in seeds]


RESULT_STATUSES = ("optimal", "feasible", "heuristic")


@pytest.mark.parametrize(("p", "m", "seed"), CASES)
def test_heuristic_hint_matches_brute_force_and_cpsat(p: int, m: int, seed: int) -> None:
    problem = _problem(p, m, seed)
    best = _optimum(p, m, seed)
    hint = zb_heuristic(problem).orders
    # A zero-time op makes the scaling approximate: optimality is then not claimed.
    proven = "optimal" if scale(problem).time_tolerance == 0 else RESULT_STATUSES
    for objective in OBJECTIVES:
        true_best = best.cost if objective == "cost" else best.makespan
        hint_value = _objective(problem, hint, objective)
        for fifo in (False, True):
            result = solve_milp(problem, hint, objective=objective, fifo=fifo)
            assert result.status in proven, (objective, fifo)
            assert result.orders is not None and result.objective is not None
            assert result.objective == pytest.approx(
                _objective(problem, result.orders, objective), abs=1e-9)
            assert result.objective <= hint_value + 1e-9
            assert result.bound <= result.objective + 1e-9
            # The brute force enumerates every order (B, W, even F out of microbatch
            # order): nothing beats it, and the free-order MILP reaches it.
            assert result.objective >= true_best - 1e-9
            if not fifo:
                assert result.objective == pytest.approx(true_best, abs=1e-9)
            cpsat = solve_cpsat(problem, hint, objective=objective, fifo=fifo)
            assert cpsat.status in proven
            assert result.objective == pytest.approx(cpsat.objective, abs=1e-9)


@pytest.mark.parametrize(("p", "m", "seed"), CASES)
def test_poor_hint_reaches_the_optimum(p: int, m: int, seed: int) -> None:
    # From a microbatch-at-a-time hint, the MILP itself must find and prove the optimum
    # (every op takes time here: see test_zero_time_ops_are_timed_as_one_tick).
    problem = _problem(p, m, seed, positive=True)
    best = _optimum(p, m, seed, positive=True)
    hint = _sequential(problem)
    for objective in OBJECTIVES:
        result = solve_milp(problem, hint, objective=objective, fifo=False)
        assert result.status == "optimal"
        assert result.objective == pytest.approx(
            best.cost if objective == "cost" else best.makespan, abs=1e-9)
        # On these tiny shapes the FIFO restriction loses nothing.
        fifo = solve_milp(problem, hint, objective=objective, fifo=True)
        assert fifo.status == "optimal"
        assert fifo.objective == pytest.approx(result.objective, abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, pytest.param(4, marks=pytest.mark.slow),
                                  pytest.param(5, marks=pytest.mark.slow)])
def test_matches_cpsat_beyond_brute_force(seed: int) -> None:
    # p = 3, m = 3: too many orders to enumerate; CP-SAT is the reference.
    problem = _problem(3, 3, seed, positive=True)
    for hint in (zb_heuristic(problem).orders, _sequential(problem)):
        for objective in OBJECTIVES:
            for fifo in (False, True):
                result = solve_milp(problem, hint, objective=objective, fifo=fifo)
                cpsat = solve_cpsat(problem, hint, objective=objective, fifo=fifo)
                assert (result.status, cpsat.status) == ("optimal", "optimal")
                assert result.objective == pytest.approx(cpsat.objective, abs=1e-9)


@pytest.mark.parametrize("placement", ["loop", "v"])
def test_matches_cpsat_with_two_chunks(placement: str) -> None:
    problem = parse_profile({
        "num_ranks": 2, "num_microbatches": 2, "num_chunks": 2, "placement": placement,
        "t_f": [2, 3, 2, 2], "t_b": [3, 1, 3, 2], "t_w": [2, 2, 3, 2], "t_comm": 1.0,
        "m_b": 1.0, "m_w": 0.5, "memory_limit": 3.0}).problem
    hint = _sequential(problem)
    for objective in OBJECTIVES:
        result = solve_milp(problem, hint, objective=objective, fifo=False)
        cpsat = solve_cpsat(problem, hint, objective=objective, fifo=False)
        assert (result.status, cpsat.status) == ("optimal", "optimal")
        assert result.objective == pytest.approx(cpsat.objective, abs=1e-9)
        assert result.objective < _objective(problem, hint, objective)


def test_time_limit_keeps_the_hint_floor() -> None:
    # p = 4, m = 8 from a poor hint is beyond CBC in a second: the answer is whatever it
    # found (never worse than the hint), with an honest bound and on time.
    problem = parse_profile({"num_ranks": 4, "num_microbatches": 8, "t_f": 1.0,
                             "t_b": 1.0, "t_w": 1.0, "m_b": 1.0, "m_w": 0.5}).problem
    hint = _sequential(problem)
    seen: list[tuple[float, float, float]] = []
    result = solve_milp(problem, hint, time_limit_s=1.0, on_progress=seen.append)
    assert result.status in ("optimal", "feasible", "heuristic")
    assert result.objective is not None
    assert result.objective <= _objective(problem, hint, "cost") + 1e-9
    assert problem.simple_lower_bound - 1e-9 <= result.bound <= result.objective + 1e-9
    assert result.wall_s < 5.0
    assert result.progress == seen and len(seen) <= 1


def test_progress_reports_the_answer() -> None:
    problem = _problem(2, 2, 5, positive=True)
    seen: list[tuple[float, float, float]] = []
    result = solve_milp(problem, _sequential(problem), fifo=False, on_progress=seen.append)
    assert len(seen) == 1
    seconds, value, bound = seen[0]
    assert 0 <= seconds <= result.wall_s
    assert value == pytest.approx(result.objective) and bound == pytest.approx(value)


def test_infeasible_memory_limit_is_a_status() -> None:
    problem = _problem(3, 2, 0)
    need = problem.min_memory_per_rank
    too_small = dataclasses.replace(problem, memory_limit=tuple(x / 2 for x in need))
    result = solve_milp(too_small, zb_heuristic(problem).orders)
    assert result.status == "infeasible"
    assert result.orders is None and result.objective is None
    assert result.min_feasible_limit == need
    assert result.backend == "milp"


def test_unknown_solver_is_refused() -> None:
    problem = _problem(2, 1, 0)
    with pytest.raises(ProfileError) as raised:
        solve_milp(problem, zb_heuristic(problem).orders, solver_name="NO_SUCH_SOLVER")
    assert raised.value.field == "backend"
    assert raised.value.value == "NO_SUCH_SOLVER"
    assert "PULP_CBC_CMD" in raised.value.accepted


def test_named_default_solver() -> None:
    problem = _problem(2, 2, 5)
    hint = zb_heuristic(problem).orders
    named = solve_milp(problem, hint, solver_name="PULP_CBC_CMD")
    assert named.status == "optimal"
    assert named.objective == solve_milp(problem, hint).objective


def test_an_unreadable_cbc_log_is_logged_not_silent(tmp_path: Any, caplog: Any) -> None:
    # PuLP does not report CBC's bound; it is read from CBC's log. A log that cannot be
    # read leaves the run without a bound of its own, and says so.
    from ppsched.solver.exact.milp import _reported_bound

    problem = _problem(2, 2, 5)
    scaled = scale(problem)
    ticks, cost, _ = hint_timing(problem, scaled, zb_heuristic(problem).orders)
    model, _ = build_milp(problem, scaled, ticks, cost)
    with caplog.at_level("WARNING", logger="ppsched.solver.exact.milp"):
        assert _reported_bound(model, None, str(tmp_path / "missing.log")) is None
    assert "could not read the bound from CBC's log" in caplog.text
    readable = tmp_path / "cbc.log"
    readable.write_text("Result - Stopped on time limit\nLower bound:  12.5\n")
    assert _reported_bound(model, None, str(readable)) == 12.5


def test_too_large_points_to_cpsat() -> None:
    m = MAX_OPS // 12 + 1  # 4 ranks, 3 ops per microbatch per stage
    problem = parse_profile({"num_ranks": 4, "num_microbatches": m, "t_f": 1.0,
                             "t_b": 1.0, "t_w": 1.0, "m_b": 1.0, "m_w": 0.5}).problem
    with pytest.raises(ProfileError) as raised:
        solve_milp(problem, zb_heuristic(problem).orders)
    assert raised.value.field == "backend"
    assert "cpsat" in raised.value.accepted


@pytest.mark.parametrize(("fifo", "num_binaries"), [(True, 27), (False, 54)])
def test_model_size_p3_m3(fifo: bool, num_binaries: int) -> None:
    # Per rank, 9 ops make 36 pairs. With FIFO the graph orders 27 of them (each
    # microbatch's F < B < W, each kind in microbatch order, and what follows), leaving
    # F(j+1)/F(j+2) against B(j) and W(j), and B(k) against W(j) for j < k: 9 binaries.
    # Without FIFO, B and W of different microbatches are free too: 18.
    problem = _problem(3, 3, 0)
    scaled = scale(problem)
    hint = zb_heuristic(problem).orders
    ticks, cost, _ = hint_timing(problem, scaled, hint)
    model, end = build_milp(problem, scaled, ticks, cost, "cost", fifo)
    binaries = [v for v in model.variables() if v.cat == pulp.LpInteger
                and v.lowBound == 0 and v.upBound == 1]
    assert len(binaries) == num_binaries
    assert len(end) == 3 * 3 * 3
    # Each rank's first op is pinned where list scheduling starts it.
    find = getattr(model, "get_constraint_by_name", None)  # PuLP >= 3.3
    pinned = find("first_2") if find is not None else model.constraints["first_2"]
    assert pinned.sense == pulp.LpConstraintEQ
    assert dict(pinned.items()) == {end[Op("F", 2, 0)]: 1}
    assert -pinned.constant == \
        scaled.f[0] + scaled.comm[0] + scaled.f[1] + scaled.comm[1] + scaled.f[2]


def test_zero_time_ops_never_yield_a_wrong_proven_optimum() -> None:
    # t_w[0] = 0: a zero-time op still takes one tick in the model. The scale grows until
    # that stretch is within the stated tolerance, and optimality is not claimed from a
    # model that is not exact; the true optimum (14, found by exhaustive search) is found.
    problem = parse_profile({
        "num_ranks": 2, "num_microbatches": 2, "t_f": [3, 2], "t_b": [3, 1], "t_w": [0, 1],
        "t_comm": 1.0, "m_b": [2, 2], "m_w": [0.0, 2.0]}).problem
    assert _brute_force(problem).cost == 14.0
    assert 0 < scale(problem).time_tolerance <= 1e-4
    for result in (solve_milp(problem, _sequential(problem), fifo=False),
                   solve_cpsat(problem, _sequential(problem), fifo=False, workers=1)):
        assert result.objective == 14.0
        assert result.bound <= 14.0 and not math.isinf(result.bound)
        assert result.status in ("optimal", "feasible")


@pytest.mark.parametrize("backend", ["milp", "cpsat"])
def test_a_hint_with_fused_backward_is_accepted(backend: str) -> None:
    # Below 1F1B's memory the heuristic's best can be the capped 1F1B, which fuses B and
    # W into BW: both backends take such a hint.
    from ppsched.solver.generators.classic import one_f_one_b_capped

    problem = _problem(3, 2, 1)
    hint = one_f_one_b_capped(problem, 1)
    assert any(op.kind == "BW" for ops in hint for op in ops)
    solve = solve_milp if backend == "milp" else solve_cpsat
    result = solve(problem, hint, time_limit_s=10)
    assert result.orders is not None and simulate(problem, result.orders).ok
