"""`first_best` gives the first-best fold's answer exactly, searching less where bounds
settle comparisons."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from ppsched.solver import load_profile, solve
from ppsched.solver.solving import pipeline
from ppsched.solver.solving.first_best import EPS, first_best

ROOT = Path(__file__).resolve().parents[3]


def fold(values: list[float]) -> int:
    """The fold `solve` runs: the first candidate, replaced by each later one that beats
    the answer so far by more than EPS."""
    answer = 0
    for i in range(1, len(values)):
        if values[i] < values[answer] - EPS:
            answer = i
    return answer


def run(bounds: list[float], values: list[float], raced: random.Random | None = None,
        ) -> tuple[int, tuple[str, float], list[int]]:
    """`first_best` over candidates whose searches give `values`. With `raced`, a search
    whose value is not below its ``below`` returns another value that is not either
    (drawn from `raced`: ``below`` itself, more, or inf), as a raced search may."""
    calls: list[int] = []

    def search(i: int, below: float) -> tuple[str, float]:
        calls.append(i)
        if raced is not None and values[i] >= below:
            return f"raced out {i}", raced.choice((below, below + EPS / 3, below + 1.0,
                                                   math.inf))
        return f"orders {i}", values[i]

    index, result = first_best(bounds, search)
    return index, result, calls


def test_random_cases_give_the_fold_answer_and_search_each_candidate_once() -> None:
    rng = random.Random(3)
    for _ in range(5000):
        n = rng.randint(1, 5)
        # Few distinct levels, so ties, near-ties within EPS and equal bounds are common.
        levels = [rng.choice((0.0, 1.0, 1.0 + EPS / 2, 2.0, 3.0)) for _ in range(n)]
        values = [x + rng.choice((0.0, 0.0, 1.0, 2.5)) for x in levels]
        bounds = [min(v, x) for v, x in zip(values, levels, strict=True)]
        for raced in (None, rng):
            index, result, calls = run(bounds, values, raced)
            assert index == fold(values), (bounds, values)
            assert result == (f"orders {index}", values[index])
            assert len(calls) == len(set(calls))


def test_a_later_search_learns_what_it_must_beat() -> None:
    seen: dict[int, float] = {}

    def search(i: int, below: float) -> tuple[str, float]:
        seen[i] = below
        return "x", [10.0, 8.0, 9.0][i]

    # Searched by least bound: 1 (nothing before it known), 2 (1 before it), 0 (none).
    assert first_best([5.0, 1.0, 2.0], search)[0] == 1
    assert seen == {1: math.inf, 2: 8.0, 0: math.inf}


def test_a_layout_whose_bound_exceeds_another_answer_is_not_searched() -> None:
    # gpt1.5b-p8-m24 at 1p: single-chunk bound 1309.5, V answers 1185.15 (bound 1110),
    # loop2 answers more than V (bound 1178.15).
    index, result, calls = run([1309.5, 1110.0, 1178.15], [1309.5, 1185.15, 1200.0])
    assert (index, result[1]) == (1, 1185.15)
    assert sorted(calls) == [1, 2]


def test_a_tie_keeps_the_earlier_candidate_even_when_searched_later() -> None:
    # The second candidate has the lower bound, so it is searched first; the first
    # still wins the tie, as in the fold.
    index, _, calls = run([5.0, 1.0], [5.0, 5.0])
    assert index == 0 and calls == [1, 0]


def test_no_candidate_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one candidate"):
        first_best([], lambda i, below: ("x", 0.0))


def _every_layout_searched(bounds, search):  # type: ignore[no-untyped-def]
    """The fold as `solve` ran it before `first_best`: every candidate searched."""
    results = [search(i, math.inf) for i in range(len(bounds))]
    index = fold([r[-1] for r in results])
    return index, results[index]


def test_solve_skips_the_single_chunk_search_at_1p_and_answers_the_same(
        monkeypatch: pytest.MonkeyPatch) -> None:
    profile = load_profile(ROOT / "profiles" / "gpt1.5b-p8-m24.json")  # limit 1p
    searched: list[int] = []
    real = pipeline.heuristic_orders

    def counted(problem, objective="cost", below=math.inf):  # type: ignore[no-untyped-def]
        searched.append(problem.num_chunks)
        return real(problem, objective, below)

    monkeypatch.setattr(pipeline, "heuristic_orders", counted)
    pruned = solve(profile)
    assert pruned.solver is not None
    # Bounds: one chunk 1309.5 > V's cost 1185.15 > loop2's bound 1178.15.
    assert pruned.solver.layout == "v"
    assert pruned.solver.layout_bounds["1"] > pruned.metrics.cost  # type: ignore[union-attr]
    assert searched == [2, 2]  # V and loop2; not the single-chunk layout
    monkeypatch.setattr(pipeline, "first_best", _every_layout_searched)
    searched.clear()
    full = solve(profile)
    assert searched == [1, 2, 2]
    for schedule in (pruned, full):
        assert schedule.solver is not None
        schedule.solver.wall_s = 0.0
    assert pruned.model_dump(mode="json") == full.model_dump(mode="json")
