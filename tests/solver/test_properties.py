"""Property tests (STYLE.md choice 10): on random single-chunk profiles every generator's
order validates (up to its memory), the heuristic's always does, and no figure beats the
lower bound."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ppsched.solver.generators import REGISTRY
from ppsched.solver.heuristic.search import zb_heuristic
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.result import Metrics, Simulation
from ppsched.solver.sim.simulator import simulate, validate

from tests.floors import Tally

GENERATORS = ("gpipe", "1f1b", "zb-h1", "zb-h2")
PROPERTY_SETTINGS = settings(max_examples=200, deadline=None)


def _value(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


@st.composite
def random_profiles(draw: st.DrawFn) -> dict[str, Any]:
    """A single-chunk profile with per-stage times and memory, and maybe a limit that
    some schedule can meet (at least each rank's m_b)."""
    p = draw(st.integers(1, 6))
    m = draw(st.integers(1, 12))
    per_stage = st.lists(_value(0.1, 5.0), min_size=p, max_size=p)
    t_comm = draw(st.one_of(_value(0.0, 1.0),
                            st.lists(_value(0.0, 1.0), min_size=p - 1, max_size=p - 1)))
    m_b = draw(st.lists(_value(0.5, 2.0), min_size=p, max_size=p))
    # m_w as a share of m_b: 0, all of it, or a share that is not vanishingly small.
    share = st.one_of(st.sampled_from([0.0, 0.5, 1.0]), _value(0.01, 1.0))
    m_w = [x * draw(share) for x in m_b]
    headroom = st.floats(1.0, p + 2.0)  # in units of the least a rank can hold
    limit = draw(st.sampled_from(["none", "scalar", "per-rank"]))
    memory_limit: float | list[float] | None = None
    if limit == "scalar":
        memory_limit = max(m_b) * draw(headroom)
    elif limit == "per-rank":
        memory_limit = [x * draw(headroom) for x in m_b]
    return {"num_ranks": p, "num_microbatches": m, "t_f": draw(per_stage),
            "t_b": draw(per_stage), "t_w": draw(per_stage), "t_comm": t_comm, "m_b": m_b,
            "m_w": m_w, "memory_limit": memory_limit}


def _check_figures(problem: Problem, metrics: Metrics | None, valid: bool = True) -> Metrics:
    """Figures every timed schedule has; a valid one never beats the proven lower bound
    (a schedule over the memory limit may beat a bound that uses the limit)."""
    assert metrics is not None
    assert metrics.cost >= problem.simple_lower_bound - 1e-9
    assert metrics.makespan >= metrics.cost - 1e-9
    assert metrics.lower_bound >= problem.simple_lower_bound - 1e-9
    if valid:
        assert metrics.cost >= metrics.lower_bound - 1e-9
    assert 0.0 <= metrics.bubble_rate < 1.0
    return metrics


def _has_limit(problem: Problem) -> bool:
    return any(x != float("inf") for x in problem.memory_limit)


@PROPERTY_SETTINGS
@given(data=random_profiles())
def test_generators_validate_up_to_memory(data: dict[str, Any]) -> None:
    problem = parse_profile(data).problem
    for name in GENERATORS:
        sim: Simulation = simulate(problem, REGISTRY[name](problem))
        kinds = {v.kind for v in sim.violations}
        if _has_limit(problem):
            assert kinds <= {"memory"}, (name, sim.violations)
        else:
            assert not kinds, (name, sim.violations)
        _check_figures(problem, sim.metrics, valid=sim.ok)


@PROPERTY_SETTINGS
@given(data=random_profiles())
def test_heuristic_validates_and_times_itself_exactly(data: dict[str, Any]) -> None:
    problem = parse_profile(data).problem
    build = zb_heuristic(problem)
    sim = validate(problem, build.orders)  # memory included
    metrics = _check_figures(problem, sim.metrics)
    assert build.cost == pytest.approx(metrics.cost, abs=1e-9)
    assert build.makespan == pytest.approx(metrics.makespan, abs=1e-9)
    for r, peak in enumerate(metrics.peak_memory):
        assert peak <= problem.memory_limit[r] + 1e-9


@settings(max_examples=40, deadline=None)
@given(data=random_profiles())
def test_heuristic_by_makespan(data: dict[str, Any]) -> None:
    problem = parse_profile(data).problem
    build = zb_heuristic(problem, objective="makespan")
    metrics = _check_figures(problem, validate(problem, build.orders).metrics)
    assert build.makespan == pytest.approx(metrics.makespan, abs=1e-9)


def test_heuristic_no_worse_than_fitting_generators() -> None:
    # ZB-H1 and ZB-H2 are among the heuristic's candidates wherever they fit the limit.
    fitting = Tally("ZB-H1 or ZB-H2 fits the limit")

    @settings(max_examples=60, deadline=None)
    @given(data=random_profiles())
    def check(data: dict[str, Any]) -> None:
        problem = parse_profile(data).problem
        cost = zb_heuristic(problem).cost
        fits = 0
        for name in ("zb-h1", "zb-h2"):
            sim = simulate(problem, REGISTRY[name](problem))
            if sim.ok:
                fits += 1
                assert sim.metrics is not None
                assert cost <= sim.metrics.cost + 1e-9
        fitting.note(fits > 0)

    check()
    fitting.assert_floor(0.2)  # measured over 24 seeds: 43-93% of 60 draws


@pytest.mark.parametrize("name", [*GENERATORS, "heuristic"])
def test_single_chunk_schedules_refuse_chunks(name: str) -> None:
    problem = parse_profile({"num_ranks": 2, "num_microbatches": 4, "num_chunks": 2,
                             "placement": "v", "t_f": 1.0, "t_b": 1.0, "t_w": 1.0,
                             "m_b": 1.0, "m_w": 1.0}).problem
    with pytest.raises(ProfileError) as info:
        zb_heuristic(problem) if name == "heuristic" else REGISTRY[name](problem)
    assert info.value.field == "num_chunks"


@pytest.mark.parametrize("fields", [
    {"num_ranks": 1, "num_microbatches": 1},
    {"num_ranks": 4, "num_microbatches": 1},
    {"num_ranks": 1, "num_microbatches": 5, "memory_limit": 1.0},
    {"num_ranks": 3, "num_microbatches": 6, "t_w": 0.0},
    {"num_ranks": 3, "num_microbatches": 6, "t_w": [0.0, 1.0, 0.0]},
    {"num_ranks": 3, "num_microbatches": 6, "t_f": 0.0, "t_b": 0.0, "t_w": 0.0},
    {"num_ranks": 3, "num_microbatches": 6, "m_b": 0.0, "m_w": 0.0, "memory_limit": 1.0},
    {"num_ranks": 4, "num_microbatches": 8, "memory_limit": 1.0},
    {"num_ranks": 4, "num_microbatches": 8, "t_comm": [0.0, 5.0, 0.0]},
], ids=["p1-m1", "p4-m1", "p1-tight", "t_w-zero", "t_w-some-zero", "all-zero",
        "no-memory", "tightest", "slow-link"])
def test_heuristic_edge_profiles(fields: dict[str, Any]) -> None:
    data = {"t_f": 1.0, "t_b": 1.0, "t_w": 1.0, "m_b": 1.0, "m_w": 1.0}
    data.update(fields)
    problem = parse_profile(data).problem
    build = zb_heuristic(problem)
    metrics = _check_figures(problem, validate(problem, build.orders).metrics)
    assert build.cost == pytest.approx(metrics.cost, abs=1e-9)
