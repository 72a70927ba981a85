"""Provable lower bounds on a schedule's cost (largest per-rank span).

The simple bound is the busiest rank's op time. With one stage per rank and a memory
limit, a sharper one follows from the round trip of a microbatch (see `rank_span_bound`);
on the paper's configurations at 1p memory it meets the heuristic's cost, proving it
optimal there.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from functools import lru_cache

from ppsched.solver.model.policy_fields import policy_fields
from ppsched.solver.model.problem import Problem

_EPS = 1e-9


@lru_cache(maxsize=256)
def lower_bound(problem: Problem) -> float:
    """The best lower bound ppsched can prove for `problem` (cost; makespan is >= cost)."""
    if policy_fields(problem).any:
        return policy_lower_bound(problem)
    bound = problem.simple_lower_bound
    if not problem.uniform_microbatches:
        # The round-trip and memory bounds below read one value per stage; with unequal
        # microbatches (DESIGN.md 6.2) only the round trip is generalised.
        if problem.num_chunks == 1:
            bound = max(bound, *(unequal_round_trip_bound(problem, r)
                                 for r in range(problem.num_ranks)))
        return bound
    if problem.num_chunks == 1:
        ranks = _longest_trip_ranks(problem)
        bound = max(bound, *(rank_span_bound(problem, r) for r in ranks),
                    *(memory_chain_bound(problem, r) for r in ranks))
    else:  # the one-chunk bounds above already charge the warm-up (`rank_span_bound`)
        bound = max(bound, *(warmup_bound(problem, r) for r in range(problem.num_ranks)))
    return bound


def _longest_trip_ranks(problem: Problem) -> list[int]:
    """The ranks whose `rank_span_bound` and `memory_chain_bound` can be the largest
    (one stage per rank).

    Both bounds read the rank's own op times, memory and limit, and its round trip, and
    never fall as the round trip grows (each term is a sum of it with the rest, kept by
    max and min, and the rounding of a float sum never reverses an order). Of the ranks
    alike in all but the round trip, the one with the longest bounds them all: on the
    paper's profiles, one rank instead of p (issue 11: the bound was a tenth of a p=8
    solve).
    """
    longest: dict[tuple[float, ...], tuple[float, int]] = {}
    for r in range(problem.num_ranks):
        alike = (problem.t_f[r], problem.t_b[r], problem.t_w[r], problem.m_b[r],
                 problem.m_w[r], problem.memory_limit[r])
        trip = round_trip(problem, r)
        if alike not in longest or trip > longest[alike][0]:
            longest[alike] = (trip, r)
    return [r for _, r in longest.values()]


def round_trip(problem: Problem, stage: int) -> float:
    """Least time from the start of F(stage, j) to the start of B(stage, j).

    F runs down from `stage` to the last stage, then B runs back up to stage+1, with the
    latency at each boundary both ways.
    """
    last = problem.num_stages - 1
    forward = sum(problem.t_f[stage:]) + sum(problem.t_comm[stage:last])
    backward = sum(problem.t_b[stage + 1:]) + sum(problem.t_comm[stage:last])
    return forward + backward


def unequal_round_trip_bound(problem: Problem, rank: int) -> float:
    """A lower bound on the span of `rank` (one stage per rank) with unequal microbatches.

    Let microbatch j be the one of the rank's last F. Every other F of the rank runs
    before it; after it, j's forward goes down to the last stage and its backward comes
    back up (each op with j's own times, each boundary with j's own latency), then B and
    W of j run here. Not knowing j, the least over j bounds the span; it never falls below
    the rank's total op time.
    """
    s, m, last = rank, problem.num_microbatches, problem.num_stages - 1
    f, b, w = problem.t_f_mb, problem.t_b_mb, problem.t_w_mb
    all_f = math.fsum(f[s])
    best = math.inf
    for j in range(m):
        comm = math.fsum(problem.t_comm_mb[x][j] for x in range(s, last))
        trip = math.fsum(f[x][j] for x in range(s, last + 1)) \
            + math.fsum(b[x][j] for x in range(s + 1, last + 1)) + 2 * comm
        best = min(best, all_f - f[s][j] + trip + b[s][j] + w[s][j])
    return max(problem.busy_per_rank[rank], best)


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


def warmup_bound(problem: Problem, rank: int) -> float:
    """A lower bound on the span of `rank` in any layout (equal microbatches, no
    recompute or offload) from its warm-up, where memory caps the forwards.

    Let lo and hi be the rank's lowest and highest stages. Its first op is an F on lo
    (an F on a later stage of the rank follows its microbatch's F on lo, and B and W
    follow F), say at s0. Any B of the rank, B(s, j), starts at least the trip after
    F(lo, j): j's forwards from lo to the last stage, then its backwards from the last
    stage up to s + 1, with the latency of each boundary between ranks; the least trip is
    to hi. Until its first B starts, the rank runs only Fs (a W follows its B, an FB or
    BW holds a B), one at a time and each adding its m_b, nothing freed: only Fs whose
    m_b fit the limit together (`_forward_work_that_fits`). So the rank idles at least
    trip - that work, and span >= its op time + that idle. With one chunk per rank
    `rank_span_bound` charges the same idle and more.
    """
    stages = problem.rank_to_stages[rank]
    lo, hi, last = min(stages), max(stages), problem.num_stages - 1
    trip = math.fsum([*problem.t_f[lo:], *problem.t_b[hi + 1:],
                      *(problem.comm(x, x + 1) for x in range(lo, last)),
                      *(problem.comm(x, x + 1) for x in range(hi, last))])
    idle = trip - _forward_work_that_fits(problem, stages, problem.memory_limit[rank])
    return problem.busy_per_rank[rank] + max(0.0, idle)


def _forward_work_that_fits(problem: Problem, stages: tuple[int, ...],
                            limit: float) -> float:
    """The most F time the stages' Fs (m of each) can hold with their m_b summing to at
    most `limit`: whole Fs where all are alike, else the fractional knapsack's (an upper
    bound on the whole one's)."""
    m = problem.num_microbatches
    items = sorted(((problem.t_f[s], problem.m_b[s]) for s in stages),
                   key=lambda x: -x[0] / x[1] if x[1] > 0 else -math.inf)
    if len(set(items)) == 1:
        t_f, m_b = items[0]
        count = len(items) * m if m_b <= 0 or math.isinf(limit) \
            else min(len(items) * m, int(limit / m_b + _EPS))
        return count * t_f
    work, room = 0.0, limit
    for t_f, m_b in items:
        if m_b <= 0 or m * m_b <= room:
            work, room = work + m * t_f, room - m * max(m_b, 0.0)
            continue
        return work + room / m_b * t_f  # the fraction of the Fs that fits
    return work


def _frees(k: int, m_b: float, m_w: float, limit: float) -> Iterator[tuple[int, int]]:
    """The least (#B, #W) pairs done before a rank's k-th F can start (1-based), by
    growing #B.

    Just after the k-th F starts the rank holds `k m_b - nb (m_b - m_w) - nw m_w`, with
    nw <= nb <= k - 1 (a W follows its B, a B its F). For each nb, the least nw; pairs
    that need no B at all are left out (the F is then free of memory).
    """
    need = k * m_b - limit
    if need <= _EPS:
        return
    # Whatever nw, nb Bs and nw <= nb Ws free at most nb m_b: no pair has nb below
    # need / m_b. The loop starts two short of it (rounding), where the checks below
    # still leave out what does not free enough.
    for num_b in range(max(1, math.floor(need / m_b) - 2), k):
        rest = need - num_b * (m_b - m_w)
        if rest <= _EPS:
            num_w = 0
        elif m_w <= 0 or rest > num_b * m_w + _EPS:
            continue
        else:
            num_w = math.ceil(rest / m_w - _EPS)
        if num_w <= num_b:
            yield num_b, num_w


# How far back `_chain_start` looks for the F that starts a run of Bs (a longer look
# rarely helps and costs time at m = 256).
_CHAIN_LOOKBACK = 6


def _chain_start(least: list[float], k: int, num_b: int, num_w: int, trip: float,
                 t_f: float, t_b: float, t_w: float) -> float:
    """The least start of the k-th F when `num_b` Bs and `num_w` Ws precede it (see
    `memory_chain_bound`)."""
    best = (k - 1) * t_f + num_b * t_b + num_w * t_w
    for i in range(max(1, num_b - _CHAIN_LOOKBACK), num_b + 1):
        tail = (num_b - i + 1) * t_b + max(0, num_w - i + 1) * t_w
        best = max(best, least[i] + trip + tail, least[i] + (k - i) * t_f + tail)
    return best


def memory_chain_bound(problem: Problem, rank: int) -> float:
    """A lower bound on the span of `rank` (one stage per rank) from the chain that the
    memory limit puts between its forwards; it holds in any order.

    Let T(k) be the least start of the rank's k-th F after its first op (T(1) = 0). The
    k-th F needs nb Bs and nw Ws done first (`_frees`); they belong to nb (nw) distinct
    microbatches among the first k - 1 Fs, so at least nb - i + 1 of those Bs (and
    nw - i + 1 of the Ws) belong to Fs started at T(i) or later: they run one after
    another, each a round trip after its F, so T(k) >= T(i) + RT + (nb - i + 1) t_b +
    (nw - i + 1)+ t_w (`_chain_start`); the rank also ran k - i Fs from T(i). Each valid
    (nb, nw) gives the max of these, and the least over them bounds T(k). The span is
    then at least T(m) plus the round trip, B and W of the last F's microbatch. Where
    memory never binds this is the round trip bound of `rank_span_bound`; below 1F1B's
    memory it grows with every K = limit / m_b Fs.
    """
    s, m = rank, problem.num_microbatches
    t_f, t_b, t_w = problem.t_f[s], problem.t_b[s], problem.t_w[s]
    m_b, m_w, limit = problem.m_b[s], problem.m_w[s], problem.memory_limit[rank]
    trip = round_trip(problem, s)
    growing = m_w > 0 and t_b * m_w >= (m_b - m_w) * t_w  # a B's time >= the W time it saves
    least = [0.0, 0.0]  # least[k]: T(k); index 0 unused
    for k in range(2, m + 1):
        start = least[k - 1] + t_f
        # max(start, the least chain start over the pairs), without the chains that
        # cannot change it (issue 11: this bound was 90% of a cold solve at p=32, m=256):
        # a chain starts no earlier than the time of its own ops (and the pairs come by
        # growing #B), and once one chain starts by `start` the answer is `start`.
        least_chain = math.inf
        if math.isfinite(limit) and m_b > 0:
            need = k * m_b - limit
            for nb, nw in _frees(k, m_b, m_w, limit):
                ops = (k - 1) * t_f + nb * t_b
                if ops >= least_chain:
                    break  # this pair's chain and every later one start later
                if ops + nw * t_w >= least_chain:
                    # Where each more B saves less W time than it takes (`growing`), no
                    # later pair's ops take less than this pair's least (nw without its
                    # rounding up), kept a margin above the rounding of the sums.
                    if growing and ops + ((need - nb * (m_b - m_w) - _EPS) / m_w - _EPS) \
                            * t_w >= least_chain * (1 + 1e-9):
                        break
                    continue
                least_chain = min(least_chain,
                                  _chain_start(least, k, nb, nw, trip, t_f, t_b, t_w))
                if least_chain <= start:
                    break
        least.append(start if math.isinf(least_chain) else max(start, least_chain))
    return least[m] + trip + t_b + t_w


def policy_lower_bound(problem: Problem) -> float:
    """A lower bound on the cost that holds over every valid schedule of a profile that
    offers recompute or offload (DESIGN.md 6.3).

    The memory terms of `lower_bound` assume every activation stays on the device, so
    they do not hold as they are. What does hold:

    - each rank's op time, and its last F's round trip after its other m - 1 Fs
      (`rank_span_bound` without a limit): R, O and L only add work or delay a B;
    - with recompute but no offload (one chunk per rank): a rank that recomputes nothing
      holds all its activations, so its keep-only memory bounds (`rank_span_bound`,
      `memory_chain_bound`) hold for it; one that recomputes runs at least one R more
      than its op time. The rank's bound is the smaller of the two cases.

    With offload no memory term is kept: a copy can take an activation off the device
    at any time (the copy lanes are busy at most ``m`` copies each way, which the
    compute bound already covers on the paper's profiles).
    """
    unlimited = replace(problem, memory_limit=(math.inf,) * problem.num_ranks)
    bound = problem.simple_lower_bound
    if problem.num_chunks != 1:
        return bound
    fields = policy_fields(problem)
    for r in range(problem.num_ranks):
        free = rank_span_bound(unlimited, r)
        if fields.can_offload or not math.isfinite(problem.memory_limit[r]):
            bound = max(bound, free)
            continue
        kept = max(rank_span_bound(problem, r), memory_chain_bound(problem, r))
        recomputed = max(free, problem.busy_per_rank[r] + min(
            fields.t_r[s] for s in problem.rank_to_stages[r]))
        bound = max(bound, free, min(kept, recomputed))
    return bound


def clamped_to(bound: float, value: float) -> float:
    """`bound`, or `value` where the bound exceeds it only by rounding (the bound's sums
    run in another order than a timeline's)."""
    return value if value < bound <= value * (1 + 1e-12) else bound


def general_lower_bound(problem: Problem) -> float:
    """The bound the simulator reports as `lower_bound`: `lower_bound`, or with F and B
    overlapping (``overlap < 1``, DESIGN.md 6.4) `fb_lower_bound`, which also holds over
    schedules with FB ops."""
    return lower_bound(problem) if problem.overlap == 1 else fb_lower_bound(problem)


def fb_lower_bound(problem: Problem) -> float:
    """A lower bound on the cost that holds when FB ops may overlap (``overlap < 1``).

    A rank's time is at least its op time. At best every F is overlapped with a BW, which
    takes ``overlap`` of their sum; but each rank's first op is a plain F (no backward can
    run before some forward of the rank) and its last compute of a backward is a plain
    BW or B (a forward after it would have no backward left), so one F and one B run
    at full length.
    """
    best = 0.0
    for r, stages in enumerate(problem.rank_to_stages):
        if not stages:
            continue
        full = problem.busy_per_rank[r]
        floor = problem.overlap * full + (1 - problem.overlap) * (
            min(min(problem.t_f_mb[s]) for s in stages)
            + min(min(problem.t_b_mb[s]) for s in stages))
        best = max(best, min(full, floor))
    return best
