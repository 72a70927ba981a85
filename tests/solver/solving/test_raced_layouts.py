"""A large layout searched after an earlier layout's answer is known races against it
(`first_best`'s ``below``): its answer is its own wherever that is below, and the solve's
answer is the one searching every layout in full gives.

Large orders (`solver.heuristic.scale`) start at 100,000 ops; these tests lower the
threshold so that the public p=8 profiles are large, and run in seconds.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from ppsched.solver import parse_profile, solve
from ppsched.solver.heuristic import scale
from ppsched.solver.heuristic.greedy import greedy_search, raced_greedy_search
from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.problem import Problem
from ppsched.solver.solving import pipeline

from tests.solver.solving.test_first_best import _every_layout_searched

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _large_from_1000_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scale, "FULL_SEARCH_OPS", 1000)


def _profile(name: str, limit: float) -> Any:
    data = json.loads((ROOT / "profiles" / f"{name}.json").read_text())
    return parse_profile({**data, "memory_limit": limit})


def _cut(name: str, limit: float, placement: str) -> Problem:
    return with_chunks(_profile(name, limit), 2, placement).problem


@pytest.mark.parametrize(("placement", "limit"), [("v", 6.0), ("v", 8.0), ("loop", 6.0)])
def test_a_raced_search_keeps_its_answer_below_and_gives_nothing_below_otherwise(
        placement: str, limit: float) -> None:
    problem = _cut("gpt1.5b-p8-m24", limit, placement)
    orders, source, value = greedy_search(problem)
    # Above its answer: the same answer, whatever the race stopped on the way.
    assert raced_greedy_search(problem, below=value + 1e-6) == (orders, source, value)
    assert raced_greedy_search(problem, below=value * 1.5) == (orders, source, value)
    # At or under it: nothing below (None, or a candidate that is not below either).
    for below in (value, value - 1e-6, value * 0.9):
        found = raced_greedy_search(problem, below=below)
        assert found is None or found[2] >= below, (below, found and found[2])


def test_a_search_in_full_does_not_race(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its memory caps follow its best finished greedy build, which a race could hide.
    problem = _cut("gpt1.5b-p8-m24", 6.0, "loop")
    large = raced_greedy_search(problem, below=1.0)
    assert large is None
    monkeypatch.setattr(scale, "FULL_SEARCH_OPS", 100_000)
    assert raced_greedy_search(problem, below=1.0) == greedy_search(problem)


def test_a_raced_out_layout_gives_no_orders() -> None:
    # loop2 has no ZB-V, the one candidate timed whole.
    orders, _, value = pipeline.heuristic_orders(_cut("gpt1.5b-p8-m24", 6.0, "loop"),
                                                 below=100.0)
    assert (orders, value) == ([], math.inf)


@pytest.mark.parametrize(("name", "limit"), [("gpt1.5b-p8-m24", 4.0), ("gpt1.5b-p8-m24", 6.0),
                                             ("gpt6.2b-p8-m32", 6.0),
                                             ("gpt1.5b-p8-m24", 12.0)])
def test_solve_answers_as_every_layout_searched_in_full(
        monkeypatch: pytest.MonkeyPatch, name: str, limit: float) -> None:
    profile = _profile(name, limit)
    raced: list[float] = []
    real = pipeline.heuristic_orders

    def recorded(problem, objective="cost", below=math.inf):  # type: ignore[no-untyped-def]
        raced.append(below)
        return real(problem, objective, below)

    monkeypatch.setattr(pipeline, "heuristic_orders", recorded)
    answer = solve(profile)
    monkeypatch.setattr(pipeline, "first_best", _every_layout_searched)
    full = solve(profile)
    for schedule in (answer, full):
        assert schedule.solver is not None
        schedule.solver.wall_s = 0.0
    assert answer.model_dump(mode="json") == full.model_dump(mode="json")
    assert any(math.isfinite(x) for x in raced), "no layout raced: the case tests nothing"
