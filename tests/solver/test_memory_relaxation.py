"""The one-rank memory relaxation bound (`solver.memory_relaxation`): never above the
optimum of an exhaustive search, safe under its integer rounding, and above the closed
forms where memory binds."""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from ppsched.solver.exact.memory_relaxation import (
    RankBound,
    SafeScale,
    applies,
    memory_binds,
    memory_relaxation_bound,
    rank_relaxation_bound,
    relaxation_runs,
    safe_scale,
)
from ppsched.solver.model.bounds import lower_bound, round_trip
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile

from tests.solver.pins import PINNED_2026_11_27_FIFO_OPTIMUM_LIMIT_6 as FIFO_OPTIMUM_PIN
from tests.solver.pins import PINNED_2026_11_27_RANK0_RELAXATION_LIMIT_6 as RANK0_PIN
from tests.solver.test_brute_force_wide import _optimum, wide_case

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def _relaxation_bounds(problem: Problem) -> list[float]:
    """Every window the module offers: each rank alone, and each pair of neighbours."""
    p = problem.num_ranks
    windows = [(r, 1) for r in range(p)] + [(r, 2) for r in range(p - 1)]
    return [rank_relaxation_bound(problem, r, n).bound for r, n in windows]


# Two ranks, two microbatches: the wide generator's latencies (up to 6x the op times),
# fractional and per-rank limits, t_w = 0, m_w up to 2 m_b, and fused BW orders in the
# search. Only seeds whose limit binds somewhere test the memory rule.
def _binding(p: int, m: int, seeds: range) -> list[int]:
    return [seed for seed in seeds if any(memory_binds(parse_profile(
        wide_case(p, m, seed)).problem, r) for r in range(p))]


@pytest.mark.parametrize("seed", _binding(2, 2, range(120)))
def test_never_above_the_exhaustive_optimum(seed: int) -> None:
    problem = parse_profile(wide_case(2, 2, seed)).problem
    assert applies(problem)
    optimum = _optimum(problem)
    for bound in _relaxation_bounds(problem):
        assert bound <= optimum + 1e-9


def _tight_case(seed: int) -> Problem:
    """p = 2, m = 3 with one or two microbatches' memory: small enough to search in
    full, and where the memory rule decides the optimum."""
    rng = random.Random(seed)
    m_b = [rng.choice([1.0, 1.5]) for _ in range(2)]
    return parse_profile({
        "num_ranks": 2, "num_microbatches": 3,
        "t_f": [rng.choice([0.5, 1.0, 1.5]) for _ in range(2)],
        "t_b": [rng.choice([0.5, 1.0, 2.0]) for _ in range(2)],
        "t_w": [rng.choice([0.0, 0.5, 1.0, 2.0]) for _ in range(2)],
        "t_comm": [rng.choice([0.0, 1.0, 3.0])],
        "m_b": m_b, "m_w": [rng.choice([0.0, 0.5, 1.0, 2.0]) * x for x in m_b],
        "memory_limit": [x * rng.choice([1.0, 1.5, 2.0]) for x in m_b]}).problem


# Seed 2 is left out: its limit prunes so little that the search takes minutes.
@pytest.mark.slow
@pytest.mark.parametrize("seed", [s for s in range(12) if s != 2])
def test_never_above_the_optimum_with_three_microbatches(seed: int) -> None:
    problem = _tight_case(seed)
    optimum = _optimum(problem)
    for bound in _relaxation_bounds(problem):
        assert bound <= optimum + 1e-9


def test_beats_the_closed_forms_on_a_tiny_case() -> None:
    # The relaxation must prove more than `lower_bound` somewhere among the tiny cases,
    # or the tests above would pass with a bound of 0.
    gains = []
    for seed in range(12):
        problem = _tight_case(seed)
        gains.append(max(_relaxation_bounds(problem)) - lower_bound(problem))
    assert max(gains) > 1e-6


def test_safe_rounding_only_loosens() -> None:
    rng = random.Random(0)
    for _ in range(2000):
        scale = SafeScale(rng.choice([1, 10, 100, 10**4]), rng.choice([1, 10, 10**6]))
        x = rng.uniform(0, 100) if rng.random() < 0.5 else rng.randint(0, 300) / 10
        # A duration never grows beyond the fuzz the read-back takes off.
        assert scale.ticks(x) <= x * scale.time_scale * (1 + 1e-9)
        assert scale.bound_in_time_units(scale.ticks(x)) <= x
        # Held memory never grows, and whatever fits the real limit fits the scaled one.
        assert scale.demand(x) <= x * scale.memory_scale * (1 + 1e-9)
        held = [rng.choice([x, rng.uniform(0, 2)]) for _ in range(rng.randint(1, 12))]
        assert sum(scale.demand(y) for y in held) <= scale.capacity(math.fsum(held))
    # Decimal values stay exact at their own scale: gpt1.5b-p8-m24's round trip from
    # rank 0 sums to 283.09999999999997 in floats, still 2831 ticks, not 2830.
    trip = round_trip(_profile("gpt1.5b-p8-m24", 6), 0)
    assert trip < 283.1
    assert SafeScale(10, 1).ticks(trip) == 2831
    assert SafeScale(1, 100).demand(0.45) == 45
    assert SafeScale(1, 100).capacity(6.0) == 600


@pytest.mark.parametrize("seed", range(4))
def test_coarser_scale_never_raises_the_bound(seed: int) -> None:
    # Thirds are whole at no power of ten: the fallback scale rounds them down; a
    # coarser one rounds down more and may only prove less, never more than the optimum.
    rng = random.Random(seed)
    problem = parse_profile({
        "num_ranks": 2, "num_microbatches": 2,
        "t_f": [rng.choice([1 / 3, 2 / 3, 4 / 3]) for _ in range(2)],
        "t_b": [rng.choice([2 / 3, 1.0, 5 / 3]) for _ in range(2)],
        "t_w": [rng.choice([0.0, 1 / 3, 1.0]) for _ in range(2)],
        "t_comm": [rng.choice([0.0, 1 / 3, 7 / 3])], "m_b": 1 / 3, "m_w": 1 / 9,
        "memory_limit": 1 / 3}).problem
    assert safe_scale(problem, 0).time_scale == 10**4
    fine = rank_relaxation_bound(problem, 0).bound
    for time_scale in (1, 10, 100):
        coarse = rank_relaxation_bound(problem, 0, scale=SafeScale(time_scale, 10**6))
        assert coarse.bound <= fine + 1e-9
    assert fine <= _optimum(problem) + 1e-9


def _profile(name: str, limit: float) -> Problem:
    data = json.loads((PROFILES / f"{name}.json").read_text())
    return parse_profile({**data, "memory_limit": limit}).problem


def test_above_the_general_bound_at_three_quarters_of_1f1b_memory() -> None:
    # gpt1.5b-p8-m24 at limit 6 (0.75p): the closed forms give 1401.3, the relaxation of
    # rank 0 proves its own optimum, 1471.5 (a regression pin), and the single-chunk
    # FIFO optimum is 1527.3 (a pin backed by a committed witness schedule; see
    # tests/solver/pins.py). Independent: above the closed forms, below the witness.
    problem = _profile("gpt1.5b-p8-m24", 6)
    rank0 = rank_relaxation_bound(problem, 0)
    assert rank0.optimal
    assert rank0.bound == pytest.approx(RANK0_PIN, abs=1e-5)
    assert rank0.bound > lower_bound(problem) + 70
    assert rank0.bound <= FIFO_OPTIMUM_PIN
    # The window of ranks 0 and 1 starts from that floor: whatever it proves in a short
    # run, the bound does not fall below it (nor pass the optimum).
    both = memory_relaxation_bound(problem, time_limit_s=60, deterministic_s=2)
    assert RANK0_PIN - 1e-5 <= both <= FIFO_OPTIMUM_PIN


def test_only_ranks_no_other_dominates_are_solved() -> None:
    # Identical stages: rank 0 has the longest round trip, so its relaxation dominates
    # every other rank's; then rank 0 with rank 1. A lower limit on rank 5 makes its
    # own relaxation a different one, which is solved too.
    problem = _profile("gpt1.5b-p8-m24", 6)
    runs = relaxation_runs(problem, time_limit_s=60, deterministic_s=1)
    assert [(r.first, r.num_ranks) for r in runs] == [(0, 1), (0, 2)]
    data = json.loads((PROFILES / "gpt1.5b-p8-m24.json").read_text())
    tighter = parse_profile({**data, "memory_limit": [6, 6, 6, 6, 6, 3, 6, 6]}).problem
    runs = relaxation_runs(tighter, time_limit_s=60, deterministic_s=1)
    assert {(r.first, r.num_ranks) for r in runs if r.num_ranks == 1} == {(0, 1), (5, 1)}


def test_where_it_does_not_apply() -> None:
    # No binding limit: the closed forms already hold, no rank is solved.
    free = _profile("gpt1.5b-p8-m24", 24)
    assert not any(memory_binds(free, r) for r in range(free.num_ranks))
    assert memory_relaxation_bound(free, time_limit_s=10) == 0.0
    # Unequal microbatches break the exchange argument: the bound is left out.
    data = json.loads((PROFILES / "gpt1.5b-p8-m24.json").read_text())
    unequal = parse_profile({**data, "memory_limit": 6, "num_microbatches": 4,
                             "t_f": [[18.5, 9.0, 18.5, 18.5]] * 8}).problem
    assert not unequal.uniform_microbatches and not applies(unequal)
    assert math.isfinite(unequal.memory_limit[0])


def test_ilp_prints_the_relaxation_as_its_lower_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    # `--method ilp` runs the relaxation first, within its share of the budget, and the
    # bound joins metrics.lower_bound (it holds over every schedule). The budget is a work
    # limit (CP-SAT's deterministic time), so that the bound does not depend on the load.
    from ppsched.solver.solving import ExactOptions, solve
    from ppsched.solver.solving.refine import RELAXATION_SHARE

    solve_module = sys.modules["ppsched.solver.solving.refine"]
    budgets: list[float | None] = []

    def recorded(problem: Problem, **kwargs: Any) -> list[RankBound]:
        budgets.append(kwargs["work_limit"])
        return relaxation_runs(problem, **kwargs)

    monkeypatch.setattr(solve_module, "relaxation_runs", recorded)
    data = json.loads((PROFILES / "gpt1.5b-p8-m24.json").read_text())
    profile = parse_profile({**data, "memory_limit": 6})
    schedule = solve(profile, "ilp", exact=ExactOptions(work_limit=10), layouts=((1, None),))
    metrics, info = schedule.metrics, schedule.solver
    assert metrics is not None and info is not None
    assert budgets == [pytest.approx(10 * RELAXATION_SHARE)]
    assert metrics.lower_bound >= RANK0_PIN - 1e-5 > lower_bound(profile.problem)
    assert metrics.lower_bound <= metrics.cost
    assert info.bound >= metrics.lower_bound  # the printed gap is against it
    assert info.work is not None and info.work > 10 * RELAXATION_SHARE / 2


def test_ilp_leaves_it_out_beyond_its_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    # Too many microbatches to gain in a share of the time limit: not run at all.
    from ppsched.solver.solving import ExactOptions, solve
    from ppsched.solver.solving.refine import RELAXATION_MAX_MICROBATCHES

    def never(*args: object, **kwargs: object) -> list[RankBound]:
        raise AssertionError("the relaxation ran beyond RELAXATION_MAX_MICROBATCHES")

    for name in ("relaxation_runs", "v_relaxation_runs"):
        monkeypatch.setattr(sys.modules["ppsched.solver.solving.refine"], name, never)
    data = json.loads((PROFILES / "gpt1.5b-p8-m24.json").read_text())
    profile = parse_profile({**data, "memory_limit": 6,
                             "num_microbatches": RELAXATION_MAX_MICROBATCHES + 1})
    schedule = solve(profile, "ilp", exact=ExactOptions(work_limit=1), layouts=((1, None),))
    assert schedule.metrics is not None
    assert schedule.metrics.lower_bound == pytest.approx(lower_bound(profile.problem))
