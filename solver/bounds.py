"""Provable lower bounds on a schedule's cost (largest per-rank span).

The simple bound is the busiest rank's op time. With one stage per rank and a memory
limit, a sharper one follows from the round trip of a microbatch (see `rank_span_bound`);
on the paper's configurations at 1p memory it meets the heuristic's cost, proving it
optimal there.
"""

from __future__ import annotations

import math
from functools import lru_cache

from solver.profile import Problem

_EPS = 1e-9


@lru_cache(maxsize=256)
def lower_bound(problem: Problem) -> float:
    """The best lower bound ppsched can prove for `problem` (cost; makespan is >= cost)."""
    bound = problem.simple_lower_bound
    if problem.num_chunks == 1:
        bound = max(bound, *(rank_span_bound(problem, r) for r in range(problem.num_ranks)))
    return bound


def round_trip(problem: Problem, stage: int) -> float:
    """Least time from the start of F(stage, j) to the start of B(stage, j).

    F runs down from `stage` to the last stage, then B runs back up to stage+1, with the
    latency at each boundary both ways.
    """
    last = problem.num_stages - 1
    forward = sum(problem.t_f[stage:]) + sum(problem.t_comm[stage:last])
    backward = sum(problem.t_b[stage + 1:]) + sum(problem.t_comm[stage:last])
    return forward + backward


def rank_span_bound(problem: Problem, rank: int) -> float:
    """A lower bound on the span of `rank` when it runs the single stage s = rank.

    Let F* be the rank's last F, starting at sigma. Its microbatch still needs the round
    trip RT, then B and W on this rank: span >= sigma - start + RT + t_b + t_w. Before
    sigma the rank runs the m-1 other Fs, and enough Bs and Ws that F* fits in memory:
    freed >= m*m_b - limit, where a B frees m_b - m_w and a W frees m_w. If any B must
    come first, the first B cannot start before RT after the rank's first op, and until
    then the rank can only run the Fs that fit in memory, so it idles at least
    RT - min(K, m-1)*t_f there (K = Fs that fit). Taking the cheapest (#B, #W) gives the
    bound; it never falls below the rank's total op time.
    """
    s, m = rank, problem.num_microbatches
    t_f, t_b, t_w = problem.t_f[s], problem.t_b[s], problem.t_w[s]
    m_b, m_w, limit = problem.m_b[s], problem.m_w[s], problem.memory_limit[rank]
    busy = m * (t_f + t_b + t_w)
    trip = round_trip(problem, s)
    must_free = m * m_b - limit
    if math.isinf(limit) or must_free <= _EPS:
        return max(busy, (m - 1) * t_f + trip + t_b + t_w)
    cheapest = math.inf
    for num_b in range(1, m):
        rest = must_free - num_b * (m_b - m_w)
        if rest <= _EPS:
            num_w = 0
        elif rest > num_b * m_w + _EPS:
            continue  # even a W after every B would not free enough (num_w <= num_b)
        else:
            num_w = math.ceil(rest / m_w - _EPS)
        if num_w <= num_b:
            cheapest = min(cheapest, num_b * t_b + num_w * t_w)
    if math.isinf(cheapest):  # cannot happen for a limit >= m_b; stay safe
        return busy
    fits = m if m_b <= 0 else int(limit / m_b + _EPS)
    idle = max(0.0, trip - min(fits, m - 1) * t_f)
    return max(busy, (m - 1) * t_f + cheapest + idle + trip + t_b + t_w)
