"""Honest bounds (DESIGN.md section 3, issue 11): the printed lower bound holds over every
schedule, an exact model's bound is named with its scope, a bound above a cost fails
loudly, and all of it stays true when W holds more than F (`m_w > m_b`, section 6.1)."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from pathlib import Path

import pytest
from ortools.sat.python import cp_model
from ppsched.solver.exact.cpsat import solve_cpsat
from ppsched.solver.exact.frame import SCOPE_ALL, SCOPE_FIFO, checked_bound
from ppsched.solver.exact.milp import solve_milp
from ppsched.solver.model.bounds import (
    _chain_start,
    _longest_trip_ranks,
    lower_bound,
    memory_chain_bound,
    rank_span_bound,
    round_trip,
)
from ppsched.solver.model.errors import SolverError
from ppsched.solver.model.ops import Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.solving import ExactOptions, solve

from tests.solver.test_brute_force import _brute_force

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def _load(name: str, **override: object) -> dict:
    return {**json.loads((PROFILES / f"{name}.json").read_text()), **override}


def _heavy_w(seed: int) -> Problem:
    """A tiny problem whose W holds more than its F kept (m_w > m_b), with a limit that
    binds. Built on the resolved problem: profile validation is another part's."""
    rng = random.Random(seed)
    p, m = rng.choice([(2, 2), (2, 2), (3, 2)])
    base = parse_profile({
        "num_ranks": p, "num_microbatches": m,
        "t_f": [rng.randint(1, 3) for _ in range(p)],
        "t_b": [rng.randint(1, 3) for _ in range(p)],
        "t_w": [rng.randint(0, 3) for _ in range(p)],
        "t_comm": rng.choice([0.0, 1.0, 3.0]), "m_b": 1.0, "m_w": 1.0}).problem
    m_w = tuple(rng.choice([1.5, 2.0]) for _ in range(p))
    # Each rank holds m_w during a B; the limit lets one more F in, or not.
    limit = tuple(x + rng.choice([0.0, 1.0]) for x in m_w)
    return dataclasses.replace(base, m_w=m_w, memory_limit=limit)


def _one_by_one(problem: Problem) -> list[list[Op]]:
    """Microbatch after microbatch on every rank: valid under any limit >= max(m_b, m_w)
    (a hint that does not depend on the heuristic's handling of m_w > m_b)."""
    return [[Op(kind, r, j) for j in range(problem.num_microbatches) for kind in "FBW"]
            for r in range(problem.num_ranks)]


def _fifo(orders: tuple[tuple[Op, ...], ...]) -> bool:
    for ops in orders:
        for kind in "FBW":
            seen = [op.microbatch for op in ops if op.kind == kind]
            if seen != sorted(seen):
                return False
    return True


@pytest.mark.parametrize("seed", range(6))
def test_heavy_w_bounds_and_exact_models_against_brute_force(seed: int) -> None:
    problem = _heavy_w(seed)
    best = _brute_force(problem)
    assert best.num_valid > 0
    # The general bound holds over every schedule.
    assert lower_bound(problem) <= best.cost + 1e-9
    # Both exact models find the FIFO optimum, and their bounds never pass it.
    from ppsched.solver.sim.simulator import simulate

    fifo_best = min(simulate(problem, [list(ops) for ops in combo]).metrics.cost  # type: ignore[union-attr]
                    for combo in best.orders if _fifo(combo))
    hint = _one_by_one(problem)
    for result in (solve_cpsat(problem, hint, time_limit_s=20, workers=1),
                   solve_milp(problem, hint, time_limit_s=20)):
        assert result.orders is not None and result.objective is not None
        sim = simulate(problem, result.orders)
        assert sim.ok, sim.violations  # the model kept the B peak within the limit
        assert result.objective == pytest.approx(fifo_best, abs=1e-9)
        assert result.bound <= fifo_best + 1e-9
        assert result.objective >= best.cost - 1e-9


def test_heavy_w_memory_rule_binds_at_b() -> None:
    # One rank pair, m_w = 2 m_b and a limit of m_w: a second F may never be held while a
    # B holds its m_w, so the only valid orders run microbatch after microbatch.
    base = parse_profile({"num_ranks": 2, "num_microbatches": 2, "t_f": 1.0, "t_b": 1.0,
                          "t_w": 1.0, "m_b": 1.0, "m_w": 1.0}).problem
    problem = dataclasses.replace(base, m_w=(2.0, 2.0), memory_limit=(2.0, 2.0))
    best = _brute_force(problem)
    for result in (solve_cpsat(problem, _one_by_one(problem), workers=1),
                   solve_milp(problem, _one_by_one(problem))):
        assert result.objective == pytest.approx(best.cost)
        assert result.bound <= best.cost + 1e-9


def test_checked_bound_clamps_only_within_the_tolerance() -> None:
    assert checked_bound(99.0, 100.0, 1e-4) == 99.0
    assert checked_bound(100.005, 100.0, 1e-4) == 100.0
    with pytest.raises(SolverError, match="beyond the time-scaling tolerance"):
        checked_bound(100.5, 100.0, 1e-4)


def test_inflated_cpsat_bound_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    # gpt1.5b at 2p memory: CP-SAT proves the FIFO optimum, so its bound equals the cost.
    # Inflated by 5%, it would print "(optimal) gap 0.00%" if the clamp hid it.
    profile = parse_profile(_load("gpt1.5b-p8-m24", memory_limit=16))
    real = cp_model.CpSolver.best_objective_bound

    def inflated(self: cp_model.CpSolver) -> float:
        return real.fget(self) * 1.05  # type: ignore[attr-defined]

    monkeypatch.setattr(cp_model.CpSolver, "best_objective_bound", property(inflated))
    with pytest.raises(SolverError, match="exceeds the re-timed objective"):
        solve(profile, "ilp", exact=ExactOptions(time_limit_s=20, workers=1))


@pytest.mark.parametrize("backend", ["cpsat", "milp"])
def test_ilp_stops_at_once_when_the_bound_meets_the_heuristic(
        backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # At 1p memory the general bound proves the heuristic optimal: no model runs, so a
    # long time limit is not spent (issue 11: 64.8 s at p=32, m=256).
    import ppsched.solver.exact.cpsat
    import ppsched.solver.exact.lns
    import ppsched.solver.exact.milp

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("an exact model ran although the bound proves the heuristic")

    exact = ppsched.solver.exact
    for module, name in ((exact.cpsat, "solve_cpsat_phased"), (exact.cpsat, "solve_cpsat"),
                         (exact.lns, "solve_lns"), (exact.milp, "solve_milp")):
        monkeypatch.setattr(module, name, never)
    profile = parse_profile(_load("gpt1.5b-p8-m24"))
    points: list[tuple[float, float, float]] = []
    # One chunk: there the bound meets the heuristic (the V cut, which the default also
    # considers, beats it, and its bound does not meet it: tests/solver/test_layout_bounds).
    schedule = solve(profile, "ilp", exact=ExactOptions(backend=backend, time_limit_s=600),
                     on_progress=points.append, layouts=((1, None),))
    assert schedule.solver is not None and schedule.metrics is not None
    assert schedule.solver.status == "optimal"
    assert schedule.solver.bound_scope == f"{SCOPE_ALL} of layout 1"
    assert schedule.metrics.lower_bound == pytest.approx(schedule.metrics.cost)
    assert schedule.solver.wall_s < 600  # it returned: the time limit was not the stop
    assert points == [pytest.approx((points[0][0], schedule.metrics.cost,
                                     schedule.metrics.cost))]


@pytest.mark.parametrize("objective", ["cost", "makespan"])
def test_printed_bound_never_exceeds_a_cost(objective: str) -> None:
    # The case: with --objective makespan, CP-SAT's makespan bound (1235.3) was
    # printed as the lower bound over a cost of 1153.3.
    profile = parse_profile(_load("gpt1.5b-p8-m24", memory_limit=16))
    schedule = solve(profile, "ilp", objective,
                     exact=ExactOptions(time_limit_s=20, workers=1), layouts=((1, None),))
    metrics, info = schedule.metrics, schedule.solver
    assert metrics is not None and info is not None
    assert metrics.lower_bound <= metrics.cost + 1e-9
    assert metrics.lower_bound == pytest.approx(lower_bound(profile.problem))
    assert info.bound <= info.objective + 1e-9
    if info.bound > metrics.lower_bound + 1e-9:
        # The model's bound is scoped: its order family and objective are named.
        scope = info.bound_scope
        assert scope == f"{SCOPE_FIFO}, objective {objective}, layout 1"


def _memory_chain_bound_in_full(problem: Problem, rank: int) -> float:
    """`bounds.memory_chain_bound` as first written: every (#B, #W) pair's chain."""
    s, m = rank, problem.num_microbatches
    t_f, t_b, t_w = problem.t_f[s], problem.t_b[s], problem.t_w[s]
    m_b, m_w, limit = problem.m_b[s], problem.m_w[s], problem.memory_limit[rank]
    trip = round_trip(problem, s)
    least = [0.0, 0.0]
    for k in range(2, m + 1):
        pairs = []
        need = k * m_b - limit
        if math.isfinite(limit) and m_b > 0 and need > 1e-9:
            for num_b in range(1, k):
                rest = need - num_b * (m_b - m_w)
                if rest <= 1e-9:
                    num_w = 0
                elif m_w <= 0 or rest > num_b * m_w + 1e-9:
                    continue
                else:
                    num_w = math.ceil(rest / m_w - 1e-9)
                if num_w <= num_b:
                    pairs.append((num_b, num_w))
        start = least[k - 1] + t_f
        if pairs:
            start = max(start, min(_chain_start(least, k, nb, nw, trip, t_f, t_b, t_w)
                                   for nb, nw in pairs))
        least.append(start)
    return least[m] + trip + t_b + t_w


@pytest.mark.parametrize("name", sorted(p.stem for p in PROFILES.glob("*.json")))
def test_memory_chain_bound_skips_only_chains_that_cannot_matter(name: str) -> None:
    # Issue 11: the bound skips the chains that cannot change it (90% of a cold solve
    # at p=32, m=256 before); its value is the full computation's, to the last bit.
    data = _load(name)
    rng = random.Random(name)
    limits = [None] if data["memory_limit"] is None else \
        [data["memory_limit"] * k for k in (0.25, 0.5, 0.75, 1, 1.5, 2, 3)]
    for limit in limits:
        m_w = rng.choice([None, 0.0, 0.5, 1.5])  # the profile's, none, or around m_b
        problem = parse_profile({**data, "memory_limit": limit}).problem
        if m_w is not None:
            problem = dataclasses.replace(problem, m_w=tuple(
                x * m_w for x in problem.m_b))
        if problem.num_microbatches > 64:  # the full computation is slow there
            problem = dataclasses.replace(problem, num_microbatches=64)
        for r in range(problem.num_ranks):
            assert memory_chain_bound(problem, r) == _memory_chain_bound_in_full(problem, r)


def _lower_bound_every_rank(problem: Problem) -> float:
    """`bounds.lower_bound` (one chunk, alike microbatches) as it was before it kept
    only the ranks `_longest_trip_ranks` names: every rank's bounds."""
    p = problem.num_ranks
    return max(problem.simple_lower_bound, *(rank_span_bound(problem, r) for r in range(p)),
               *(memory_chain_bound(problem, r) for r in range(p)))


def _alike_stages(rng: random.Random) -> Problem:
    """A profile whose stages are alike but for some (each its latency), so that several
    ranks share all the chain bound reads but their round trip."""
    p, m = rng.randint(2, 9), rng.randint(1, 40)
    t_f, t_b, t_w = (round(rng.uniform(0.5, 2.0), 2) for _ in range(3))
    m_b = rng.choice([1.0, 0.7])
    odd = rng.randrange(p)  # one stage may differ

    def alike(value: float, scale: float) -> list[float]:
        return [round(value * scale, 2) if s == odd else value for s in range(p)]

    return parse_profile({
        "num_ranks": p, "num_microbatches": m, "t_f": alike(t_f, rng.choice([1.0, 1.2])),
        "t_b": alike(t_b, 1.0), "t_w": alike(t_w, rng.choice([1.0, 0.8])),
        "t_comm": [rng.choice([0.0, 0.1, 0.3]) for _ in range(p - 1)],
        "m_b": m_b, "m_w": round(m_b * rng.choice([0.0, 0.45, 1.0, 1.5]), 3),
        "memory_limit": rng.choice([None, m_b * rng.randint(1, 2 * p)])}).problem


def test_lower_bound_reads_the_chain_of_the_ranks_that_matter_only() -> None:
    # Issue 11: `lower_bound` takes only the longest round trip's rank bounds among
    # ranks alike in all else; its value is every rank's, to the last bit.
    rng = random.Random(11)
    problems = [_alike_stages(rng) for _ in range(300)]
    for path in sorted(PROFILES.glob("*.json")):
        data = json.loads(path.read_text())
        for k in (0.25, 0.5, 0.75, 1, 1.5, 2) if data["memory_limit"] is not None else (1,):
            limit = None if data["memory_limit"] is None else data["memory_limit"] * k
            problems.append(parse_profile({**data, "memory_limit": limit}).problem)
    pruned = 0
    for problem in problems:
        if problem.num_chunks != 1 or not problem.uniform_microbatches:
            continue
        lower_bound.cache_clear()
        assert lower_bound(problem) == _lower_bound_every_rank(problem), problem
        pruned += problem.num_ranks - len(_longest_trip_ranks(problem))
    assert pruned > 0  # the check above compared something the pruning left out
