"""The closed forms of DESIGN.md section 3 for identical stages and t_comm = 0, and where
(found by experiment, argued below) they stop holding.

Why ZB-H1 and ZB-H2 need T_W <= T_F: before rank 0 can run its first B (at the earliest
p*T_F + (p-1)*T_B after its first F) it has only forwards to run, and ZB-H1 lets it hold
p activations (ZB-H2 2p-1). Rank 0 then idles at least (p-1)*T_B (ZB-H2: (p-1)(T_B-T_F)),
which exceeds the closed form exactly when T_W > T_F. The generators reach that floor.
"""

from __future__ import annotations

import math

import pytest
from ppsched.solver.generators import REGISTRY
from ppsched.solver.generators.classic import one_f_one_b_capped
from ppsched.solver.heuristic.search import zb_heuristic
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.result import Metrics
from ppsched.solver.sim.simulator import simulate, validate

RANKS = range(1, 9)
# (T_F, T_B, T_W) with T_W <= T_F: the closed forms' domain.
TRIPLES = [(1.0, 1.0, 1.0), (1.0, 2.0, 1.0), (2.0, 3.0, 1.0), (1.0, 1.0, 0.5),
           (3.0, 2.0, 1.0), (2.0, 1.0, 1.5), (1.5, 0.5, 0.5), (1.0, 1.0, 0.0)]
# T_W > T_F: outside the closed forms of ZB-H1 and ZB-H2.
SLOW_F_TRIPLES = [(1.0, 3.0, 2.0), (0.5, 1.5, 1.0), (1.0, 1.0, 2.0), (0.5, 2.0, 1.5)]


def _problem(p: int, m: int, times: tuple[float, float, float], m_b: float = 1.0,
             m_w: float = 1.0, memory_limit: float | None = None) -> Problem:
    t_f, t_b, t_w = times
    return parse_profile({"num_ranks": p, "num_microbatches": m, "t_f": t_f, "t_b": t_b,
                          "t_w": t_w, "t_comm": 0.0, "m_b": m_b, "m_w": m_w,
                          "memory_limit": memory_limit}).problem


def _run(name: str, problem: Problem) -> Metrics:
    metrics = validate(problem, REGISTRY[name](problem)).metrics
    assert metrics is not None
    return metrics


def _bubble(metrics: Metrics, m: int, times: tuple[float, float, float]) -> float:
    return metrics.cost - m * sum(times)


def _id(times: tuple[float, float, float]) -> str:
    return "F{:g}-B{:g}-W{:g}".format(*times)


# Bubbles.


@pytest.mark.parametrize("times", TRIPLES + SLOW_F_TRIPLES, ids=_id)
@pytest.mark.parametrize("p", RANKS)
def test_1f1b_bubble(p: int, times: tuple[float, float, float]) -> None:
    t_f, t_b, t_w = times
    for m in range(1, 2 * p + 4):  # m < p too: the fused 1F1B bubble holds for any m
        metrics = _run("1f1b", _problem(p, m, times))
        assert _bubble(metrics, m, times) == pytest.approx((p - 1) * (t_f + t_b + t_w))


@pytest.mark.parametrize("times", TRIPLES, ids=_id)
@pytest.mark.parametrize("p", RANKS)
def test_zb_h1_bubble(p: int, times: tuple[float, float, float]) -> None:
    t_f, t_b, t_w = times
    for m in range(p, 2 * p + 4):
        metrics = _run("zb-h1", _problem(p, m, times))
        assert _bubble(metrics, m, times) == pytest.approx((p - 1) * (t_f + t_b - t_w))


@pytest.mark.parametrize("times", [t for t in TRIPLES if t[0] + t[1] - 2 * t[2] >= 0], ids=_id)
@pytest.mark.parametrize("p", RANKS)
def test_zb_h2_bubble(p: int, times: tuple[float, float, float]) -> None:
    # The smallest m for which the closed form holds is 2p-1 (it fails at 2p-2 for every
    # p >= 2 and T_W > 0): ZB-H2's warm-up needs 2(p-1-r) forwards on rank r.
    t_f, t_b, t_w = times
    for m in range(2 * p - 1, 2 * p + 6):
        metrics = _run("zb-h2", _problem(p, m, times))
        assert _bubble(metrics, m, times) == pytest.approx((p - 1) * (t_f + t_b - 2 * t_w))


@pytest.mark.parametrize("times", [t for t in TRIPLES if t[2] > 0], ids=_id)
@pytest.mark.parametrize("p", [2, 3, 5, 8])
def test_zb_h2_needs_2p_minus_1_microbatches(p: int, times: tuple[float, float, float]) -> None:
    t_f, t_b, t_w = times
    m = 2 * p - 2
    metrics = _run("zb-h2", _problem(p, m, times))
    assert _bubble(metrics, m, times) > (p - 1) * (t_f + t_b - 2 * t_w) + 1e-9


@pytest.mark.parametrize("times", TRIPLES, ids=_id)
@pytest.mark.parametrize("p", [2, 3, 5, 8])
def test_zb_bubbles_below_their_microbatch_floor(p: int,
                                                 times: tuple[float, float, float]) -> None:
    # With fewer microbatches only m-1 Ws can fill the round trip of the first one:
    # bubble (p-1)(T_F+T_B) - (min(m, p) - 1) T_W for ZB-H1, min(m, 2p-1) for ZB-H2.
    t_f, t_b, t_w = times
    for m in range(1, 2 * p):
        problem = _problem(p, m, times)
        h1 = _bubble(_run("zb-h1", problem), m, times)
        h2 = _bubble(_run("zb-h2", problem), m, times)
        assert h1 == pytest.approx((p - 1) * (t_f + t_b) - (min(m, p) - 1) * t_w)
        assert h2 == pytest.approx((p - 1) * (t_f + t_b) - (min(m, 2 * p - 1) - 1) * t_w)


@pytest.mark.parametrize("times", SLOW_F_TRIPLES, ids=_id)
@pytest.mark.parametrize("p", [2, 3, 4, 6])
def test_zb_bubbles_when_w_is_slower_than_f(p: int, times: tuple[float, float, float]) -> None:
    # T_W > T_F: rank 0's idle wait for its first B dominates (module docstring), so the
    # bubbles are (p-1) max(T_B, T_F+T_B-T_W) and (p-1) max(T_B-T_F, T_F+T_B-2T_W).
    t_f, t_b, t_w = times
    for m in range(2 * p - 1, 2 * p + 3):
        problem = _problem(p, m, times)
        h1 = _bubble(_run("zb-h1", problem), m, times)
        assert h1 == pytest.approx((p - 1) * max(t_b, t_f + t_b - t_w))
        if t_f + t_b - 2 * t_w >= 0:
            h2 = _bubble(_run("zb-h2", problem), m, times)
            assert h2 == pytest.approx((p - 1) * max(t_b - t_f, t_f + t_b - 2 * t_w))
        if p > 1:  # so the DESIGN.md closed form does not hold here
            assert h1 > (p - 1) * (t_f + t_b - t_w) + 1e-9


@pytest.mark.parametrize("p", RANKS)
def test_gpipe_bubble(p: int) -> None:
    times = (1.0, 2.0, 0.5)
    for m in range(1, 2 * p + 2):
        metrics = _run("gpipe", _problem(p, m, times))
        assert _bubble(metrics, m, times) == pytest.approx((p - 1) * sum(times))


# Peak memory.


@pytest.mark.parametrize("p", RANKS)
def test_peak_memory(p: int) -> None:
    times = (1.0, 1.0, 1.0)
    m_b = 1.5
    for m in range(1, 2 * p + 4):
        problem = _problem(p, m, times, m_b=m_b, m_w=m_b)  # deferred Ws hold all of m_b
        peaks = {name: max(_run(name, problem).peak_memory) for name, generator
                 in REGISTRY.items() if generator.supports(problem)}
        assert peaks["gpipe"] == pytest.approx(m * m_b)
        assert peaks["1f1b"] == pytest.approx(min(m, p) * m_b)
        assert peaks["zb-h1"] == pytest.approx(min(m, p) * m_b)
        assert peaks["zb-h2"] == pytest.approx(min(m, 2 * p - 1) * m_b)
        if m >= 2 * p - 1:  # the closed forms, in their domain
            assert peaks["1f1b"] == peaks["zb-h1"] == pytest.approx(p * m_b)
            assert peaks["zb-h2"] == pytest.approx((2 * p - 1) * m_b)


@pytest.mark.parametrize("m_w", [0.0, 0.25, 0.5, 0.99])
@pytest.mark.parametrize("p", RANKS)
def test_zb_h1_peak_with_smaller_m_w(p: int, m_w: float) -> None:
    # Rank r holds p-r activations and r deferred m_w: rank 0's p*m_b stays the maximum.
    for m in (p, 2 * p, 3 * p + 1):
        metrics = _run("zb-h1", _problem(p, m, (1.0, 1.0, 1.0), m_b=1.0, m_w=m_w))
        assert max(metrics.peak_memory) == pytest.approx(p * 1.0)
        assert metrics.peak_memory[0] == pytest.approx(p * 1.0)


@pytest.mark.parametrize("p", RANKS)
def test_per_rank_peak_of_1f1b_and_zb_h1(p: int) -> None:
    m = 2 * p + 1
    problem = _problem(p, m, (1.0, 1.0, 1.0), m_b=1.0, m_w=1.0)
    assert _run("1f1b", problem).peak_memory == pytest.approx([p - r for r in range(p)])
    # ZB-H1: p-r activations, and r Ws deferred holding m_w = m_b each.
    assert _run("zb-h1", problem).peak_memory == pytest.approx([p] * p)


# The capped 1F1B and the heuristic.


@pytest.mark.parametrize("k", [1, 2, 3, 4, 6, 9])
@pytest.mark.parametrize("p", [1, 2, 4, 6])
def test_capped_1f1b_peak(p: int, k: int) -> None:
    m = 2 * p + 2
    problem = _problem(p, m, (1.0, 2.0, 1.0), m_b=2.0, m_w=1.0)
    sim = validate(problem, one_f_one_b_capped(problem, k))
    assert sim.metrics is not None
    assert sim.memory_peak[0] == pytest.approx(min(p, k) * 2.0)
    assert max(sim.memory_peak) == pytest.approx(min(p, k) * 2.0)
    if k >= p:
        assert one_f_one_b_capped(problem, k) == REGISTRY["1f1b"](problem)


def test_capped_1f1b_refuses_zero() -> None:
    with pytest.raises(ValueError, match="max_in_flight"):
        one_f_one_b_capped(_problem(2, 2, (1.0, 1.0, 1.0)), 0)


def _zero_bubble_from(p: int, times: tuple[float, float, float]) -> int:
    """The smallest m from which the heuristic reaches zero bubble, found by experiment
    (p 1..8, m up to 40): 1 + (p-1) * ceil((T_F+T_B) / min(T_W, T_F))."""
    t_f, t_b, t_w = times
    return 1 + (p - 1) * math.ceil((t_f + t_b) / min(t_w, t_f) - 1e-9)


ZERO_BUBBLE_TRIPLES = [(1.0, 1.0, 1.0), (1.0, 2.0, 1.0), (1.0, 1.0, 0.5), (2.0, 1.0, 1.5),
                       (1.2, 1.0, 0.7), (1.0, 3.0, 2.0), (1.0, 1.0, 0.75)]


@pytest.mark.parametrize("times", ZERO_BUBBLE_TRIPLES, ids=_id)
@pytest.mark.parametrize("p", [1, 2, 3, 4, 6])
def test_heuristic_reaches_zero_bubble(p: int, times: tuple[float, float, float]) -> None:
    assert times[0] + times[1] >= 2 * times[2] > 0
    start = _zero_bubble_from(p, times)
    for m in (start, start + 1, start + 3):
        problem = _problem(p, m, times)
        build = zb_heuristic(problem)
        metrics = validate(problem, build.orders).metrics
        assert metrics is not None
        assert metrics.cost == pytest.approx(m * sum(times), abs=1e-9)
        assert metrics.bubble_rate == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("p", [2, 4, 8])
def test_heuristic_no_worse_than_zb_h1_and_zb_h2(p: int) -> None:
    for times in TRIPLES:
        for m in (p, 2 * p, 3 * p):
            problem = _problem(p, m, times)
            metrics = simulate(problem, zb_heuristic(problem).orders).metrics
            assert metrics is not None
            for name in ("1f1b", "zb-h1", "zb-h2"):
                assert metrics.cost <= _run(name, problem).cost + 1e-9
