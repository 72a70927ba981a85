"""Deadline probes (solver/exact/deadline_probes.py, `solver.cpsat.solve_cpsat_rising`): the
search over caps never claims a bound past the optimum, closes the bracket on it, and the
CP-SAT probes find the FIFO optimum of exhaustive search with an honest bound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ppsched.solver.exact.cpsat import solve_cpsat_phased, solve_cpsat_rising
from ppsched.solver.exact.deadline_probes import LONG_STEPS, MAX_PROBES, Answer, rise_to_optimum
from ppsched.solver.heuristic.search import zb_heuristic
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import simulate

from tests.solver.pins import PINNED_2026_11_27_FIFO_OPTIMUM_LIMIT_6
from tests.solver.test_bounds import _fifo
from tests.solver.test_brute_force import _brute_force, _case
from tests.solver.test_cpsat_tight import CASES

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def _oracle(optimum: int, found_at: int | None = None):  # type: ignore[no-untyped-def]
    """A probe over a problem whose optimum is `optimum`: caps below it are refuted; at or
    above it a schedule of objective `found_at` (capped by the cap) is found, unproven,
    or the optimum itself, proven, when `found_at` is None. Records the caps asked."""
    asked: list[int] = []

    def probe(cap: int, long: bool) -> Answer:
        asked.append(cap)
        if cap < optimum:
            return Answer("refuted")
        if found_at is None:
            return Answer("optimal", optimum, optimum)
        return Answer("found", min(cap, max(found_at, optimum)), 0)

    return probe, asked


@pytest.mark.parametrize(("lower", "optimum", "upper"),
                         [(1000, 1000, 2000), (1401, 1527, 1895), (10, 95, 100),
                          (0, 3, 50), (14013, 15273, 18954)])
def test_rising_search_closes_on_the_optimum(lower: int, optimum: int, upper: int) -> None:
    probe, asked = _oracle(optimum)
    raised: list[int] = []
    bracket = rise_to_optimum(probe, lower, upper, raised.append)
    assert (bracket.lower, bracket.upper, bracket.proven) == (optimum, optimum, True)
    assert raised == sorted(raised) and all(x <= optimum for x in raised)
    # Rising steps of 1%: the first cap not refuted is within a step of the optimum.
    assert min(c for c in asked if c >= optimum) <= optimum + max(1, optimum // 100 + 1)


@pytest.mark.parametrize("found_at", [1527, 1600, 10**6])
def test_found_schedules_are_bisected_to_the_optimum(found_at: int) -> None:
    # Probes that find schedules but prove nothing: bisection between refuted and found
    # caps still closes the bracket exactly on the optimum.
    probe, _ = _oracle(1527, found_at)
    bracket = rise_to_optimum(probe, 1401, 1895)
    assert (bracket.lower, bracket.upper) == (1527, 1527)
    assert bracket.probes <= MAX_PROBES


def test_an_unknown_probe_stops_the_search_with_what_was_proven() -> None:
    asked: list[tuple[int, bool]] = []

    def probe(cap: int, long: bool) -> Answer:
        asked.append((cap, long))
        return Answer("refuted") if cap < 1450 else Answer("unknown")

    bracket = rise_to_optimum(probe, 1401, 1895)
    assert not bracket.proven
    assert 1401 < bracket.lower <= 1450 and bracket.upper == 1895
    # The cap that resisted a brief probe right after a brief refutation got a long probe,
    # LONG_STEPS steps above the last refuted cap.
    (brief, short), (long_cap, long) = asked[-2:]
    assert (short, long) == (False, True)
    step = -(-bracket.lower // 100)
    assert long_cap == bracket.lower + LONG_STEPS * step > brief


def test_a_first_cap_that_resists_stops_the_probes_at_once() -> None:
    asked: list[tuple[int, bool]] = []

    def probe(cap: int, long: bool) -> Answer:
        asked.append((cap, long))
        return Answer("unknown")

    assert not rise_to_optimum(probe, 1401, 1895).proven
    assert asked == [(1416, False)]


def test_a_refutation_that_needed_the_long_limit_stops_at_the_next_resisting_cap() -> None:
    asked: list[tuple[int, bool]] = []

    def probe(cap: int, long: bool) -> Answer:
        asked.append((cap, long))
        if cap < 1420:
            return Answer("refuted")
        return Answer("refuted") if long and cap < 1480 else Answer("unknown")

    bracket = rise_to_optimum(probe, 1401, 1895)
    assert [long for _, long in asked] == [False, False, True, False]
    assert bracket.lower == asked[2][0] + 1 and not bracket.proven


def test_no_probe_when_the_bracket_is_closed() -> None:
    probe, asked = _oracle(10)
    assert rise_to_optimum(probe, 10, 10).proven and asked == []


@pytest.mark.parametrize(("p", "m", "seed"), CASES)
def test_probes_find_the_fifo_optimum_of_exhaustive_search(p: int, m: int, seed: int) -> None:
    problem = parse_profile(_case(p, m, seed)).problem
    best = _brute_force(problem)
    fifo_best = min(simulate(problem, [list(ops) for ops in combo]).metrics.cost  # type: ignore[union-attr]
                    for combo in best.orders if _fifo(combo))
    result = solve_cpsat_rising(problem, zb_heuristic(problem).orders, deterministic_s=20,
                                workers=1, seed=0)
    assert result.orders is not None and simulate(problem, result.orders).ok
    assert result.objective == pytest.approx(fifo_best, abs=1e-9)
    assert result.bound <= fifo_best + 1e-9


def test_limit_6_one_chunk_within_1_percent_with_a_gap_under_2_percent() -> None:
    # Issue 11: gpt1.5b-p8-m24 at limit 6, one chunk, FIFO optimum 1527.3. With CP-SAT's
    # deterministic time (one worker, seed 0) the run repeats exactly on any load.
    data = json.loads((PROFILES / "gpt1.5b-p8-m24.json").read_text())
    problem = parse_profile({**data, "memory_limit": 6}).problem
    result = solve_cpsat_phased(problem, zb_heuristic(problem).orders, workers=1, seed=0,
                                deterministic_s=10)
    assert result.orders is not None and simulate(problem, result.orders).ok
    assert result.objective is not None and result.objective <= 1542.6
    assert result.gap < 0.02
    # The pin is reached by a committed FIFO witness schedule (tests/solver/pins.py,
    # re-timed by the contract checker in test_pins): no valid FIFO bound exceeds it.
    assert result.bound <= PINNED_2026_11_27_FIFO_OPTIMUM_LIMIT_6 + 1e-6
