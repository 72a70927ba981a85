"""The heuristic on profiles far from the paper's: m_w > m_b, tight and per-rank limits,
and the regression cases issue 11 measured."""

from __future__ import annotations

import itertools

import pytest

from solver.emit import schedule_from_orders
from solver.profile import parse_profile
from solver.simulator import simulate
from solver.solve import heuristic_orders, solve


@pytest.mark.parametrize(("p", "m", "limit", "m_w"), list(itertools.product(
    (2, 4), (3, 8), (None, 2.0, 3.5, 6.0, [6.0, 2.0, 5.0, 2.5]), (1.5, 3.0))))
def test_m_w_above_m_b_fits_the_limit(p: int, m: int, limit: object, m_w: float) -> None:
    # DESIGN.md 6.1: a B adds m_w - m_b > 0, so Ws must also make room for Bs.
    if isinstance(limit, list):
        limit = limit[:p]
    profile = parse_profile({"num_ranks": p, "num_microbatches": m, "t_f": 1.0, "t_b": 1.2,
                             "t_w": 0.8, "t_comm": 0.1, "m_b": 1.0, "m_w": m_w,
                             "memory_limit": limit})
    schedule = solve(profile)  # validated by the simulator, or it raises
    assert schedule.metrics is not None
    limits = profile.problem.memory_limit
    assert all(x <= cap + 1e-9 for x, cap in zip(schedule.metrics.peak_memory, limits,
                                                  strict=True))
    # The order uses split backwards wherever the limit leaves room for a B's m_w.
    if limit is None:
        assert any(op.kind == "W" for op in schedule.orders()[0])


def test_v_layout_with_m_w_above_m_b() -> None:
    profile = parse_profile({"num_ranks": 4, "num_microbatches": 8, "num_chunks": 2,
                             "placement": "v", "t_f": 0.5, "t_b": 0.6, "t_w": 0.4,
                             "t_comm": 0.05, "m_b": 0.5, "m_w": 1.0, "memory_limit": 4.0})
    orders, _, value = heuristic_orders(profile.problem)
    sim = simulate(profile.problem, orders)
    assert sim.ok and sim.metrics is not None
    assert sim.metrics.cost == pytest.approx(value)
    schedule_from_orders(profile, orders, "check")
