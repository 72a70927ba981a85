"""The V search's shortcuts (issue 11: V search speed) change no answer: named schedules
generated only as far as their race reads them, greedy builds shared by the fills that
decide alike, and a build stopped once it cannot beat a candidate preferred to it."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ppsched.solver.generators import REGISTRY
from ppsched.solver.heuristic.chunked_timing import NotTimeable, time_chunked_order
from ppsched.solver.heuristic.greedy import (
    FILL_CHOICES,
    GreedyKnobs,
    greedy_schedule,
    greedy_search,
    greedy_timed,
    greedy_timed_alike,
)
from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.lazy_orders import LazyOrders
from ppsched.solver.model.ops import Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import simulate

from tests.solver.test_chunked import chunked_profiles

V_NAMES = ("zb-v", "v-half", "v-min", "dualpipe-v")


def _v(p: int, m: int, limit: float | None = None, t_comm: float = 0.0) -> Problem:
    one = parse_profile({"num_ranks": p, "num_microbatches": m, "t_f": 1.0, "t_b": 1.1,
                         "t_w": 0.8, "t_comm": t_comm, "m_b": 1.0, "m_w": 0.5,
                         "memory_limit": limit})
    return with_chunks(one, 2, "v").problem


def test_lazy_orders_pull_as_they_are_read() -> None:
    lazy = LazyOrders([iter([Op("F", 0, j) for j in range(500)]), iter([])])
    assert lazy.rows == [[], []]
    assert lazy.pull(0) and 0 < len(lazy.rows[0]) < 500  # a first pull is small
    assert not lazy.pull(1) and lazy.rows[1] == []
    assert lazy.complete() == [[Op("F", 0, j) for j in range(500)], []]
    assert not lazy.pull(0)
    orders = [[Op("F", 0, 0)]]
    assert LazyOrders.of(orders).rows is orders and not LazyOrders.of(orders).pull(0)


@pytest.mark.parametrize("name", V_NAMES)
@pytest.mark.parametrize("p,m", [(1, 1), (2, 3), (3, 6), (4, 8), (4, 13), (5, 10)])
def test_rows_are_the_generators_orders(name: str, p: int, m: int) -> None:
    problem = _v(p, m)
    generator = REGISTRY[name]
    try:
        orders = generator(problem)
    except ValueError:
        with pytest.raises(ValueError):
            generator.lazy(problem)  # refused as eagerly as the orders are
        return
    assert generator.rows is not None
    assert generator.lazy(problem).complete() == orders
    assert [list(row) for row in generator.rows(problem)] == orders


def test_a_losing_named_schedule_is_generated_no_further_than_it_lost() -> None:
    problem = _v(8, 64, t_comm=0.5)
    full = REGISTRY["v-half"](problem)
    timed = time_chunked_order(problem, full)
    assert timed is not None
    lazy = REGISTRY["v-half"].lazy(problem)
    assert time_chunked_order(problem, lazy, incumbent=timed[0] / 2) is None
    assert sum(map(len, lazy.rows)) < sum(map(len, full)) / 4
    # Raced against an incumbent it beats, the lazy order is timed and generated whole.
    lazy = REGISTRY["v-half"].lazy(problem)
    assert time_chunked_order(problem, lazy, incumbent=timed[0] + 1e-6) == timed
    assert lazy.complete() == full


@settings(max_examples=60, deadline=None)
@given(data=chunked_profiles(), deep=st.booleans(), cap=st.sampled_from([1.0, 0.75]),
       fill=st.sampled_from(FILL_CHOICES), objective=st.sampled_from(["cost", "makespan"]),
       raced=st.sampled_from([None, 0.9, 1.0, 1.05]))
def test_alike_fills_build_the_same(data: dict[str, Any], deep: bool, cap: float,
                                    fill: float, objective: str, raced: float | None) -> None:
    problem = parse_profile(data).problem
    finished = greedy_timed(problem, GreedyKnobs(fill, deep, cap), objective)
    # Raced against no incumbent, or one around the build's own value (stopped or not).
    incumbent = math.inf if raced is None or isinstance(finished, str) \
        else finished[1] * raced
    knobs = GreedyKnobs(fill, deep, cap)
    built, alike = greedy_timed_alike(problem, knobs, objective, incumbent, FILL_CHOICES)
    assert fill in alike
    assert built == greedy_timed(problem, knobs, objective, incumbent)
    for other in alike:
        assert greedy_timed(problem, GreedyKnobs(other, deep, cap), objective,
                            incumbent) == built


def test_a_losing_build_shares_its_end_with_its_fills() -> None:
    # Against ZB-V's cost the warm-up already loses, before any gap a W could fill.
    problem = _v(8, 32, limit=8.0)
    zbv = simulate(problem, REGISTRY["zb-v"](problem)).metrics
    assert zbv is not None
    built, alike = greedy_timed_alike(problem, GreedyKnobs(0.0, True), "cost",
                                      zbv.cost / 1.2, FILL_CHOICES)
    assert isinstance(built, str) and alike == FILL_CHOICES


def test_a_tie_to_a_preferred_build_is_not_the_answer() -> None:
    # Without a limit every uncapped build runs to its end; of those that tie, the
    # answer is the most preferred one (deep-first before breadth-first, fill as listed).
    problem = _v(4, 12)
    orders, source, value = greedy_search(problem)
    builds = [(knobs, greedy_timed(problem, knobs)) for knobs in
              (GreedyKnobs(fill, deep) for deep in (True, False) for fill in FILL_CHOICES)]
    values = [built[1] for _, built in builds if not isinstance(built, str)]
    assert value <= min(values) + 1e-9
    if source == "greedy":
        first = next(knobs for knobs, built in builds
                     if not isinstance(built, str) and built[1] <= value + 1e-9)
        assert orders == greedy_schedule(problem, first)


@settings(max_examples=60, deadline=None)
@given(p=st.integers(1, 4), extra=st.integers(0, 6), times=st.tuples(
    *[st.sampled_from([0.5, 1.0, 1.3, 2.0])] * 3), t_comm=st.sampled_from([0.0, 0.25, 1.0]),
       headroom=st.sampled_from([None, 0.6, 1.0, 1.5]), objective=st.sampled_from(
           ["cost", "makespan"]), overlap=st.sampled_from([1.0, 0.7]))
def test_dualpipe_v_is_timed_as_the_simulator(p: int, extra: int, times: tuple[float, ...],
                                              t_comm: float, headroom: float | None,
                                              objective: str, overlap: float) -> None:
    # DualPipe-V's FB ops are timed (at overlap 1) as the simulator times them, and raced.
    m = 2 * p + extra
    one = parse_profile({"num_ranks": p, "num_microbatches": m, "t_f": times[0],
                         "t_b": times[1], "t_w": times[2], "t_comm": t_comm, "m_b": 1.0,
                         "m_w": 0.5, "overlap": overlap,
                         "memory_limit": None if headroom is None else max(1.0, p * headroom)})
    problem = with_chunks(one, 2, "v").problem
    orders = REGISTRY["dualpipe-v"](problem)
    if overlap < 1:
        if headroom is None and any(op.kind == "FB" for row in orders for op in row):
            with pytest.raises(NotTimeable):  # left to the simulator
                time_chunked_order(problem, orders, objective)
        return
    sim = simulate(problem, orders)
    timed = time_chunked_order(problem, orders, objective)
    if not sim.ok:
        assert timed is None  # over the limit
        return
    assert sim.metrics is not None
    assert timed == (sim.metrics.cost, sim.metrics.makespan)
    value = sim.metrics.objective(objective)
    assert time_chunked_order(problem, orders, objective, value) is None
    assert time_chunked_order(problem, REGISTRY["dualpipe-v"].lazy(problem), objective,
                              value + 1e-6) == timed
