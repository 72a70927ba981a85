"""A memory-aware lower bound over every valid schedule: one rank (or two) kept whole.

Below 1F1B's memory the closed-form bounds of `solver.bounds` fall well short of the
optimum (issue 11: 1401.3 against 1527.3 on gpt1.5b-p8-m24 at limit 6). This module keeps
one rank, or a rank and its downstream neighbour, with the exact memory rule, relaxes the
rest of the pipeline into a round trip, and lets CP-SAT prove the least span of that rank.
What CP-SAT proves (its objective bound, not its best solution) holds even when it stops
early. `memory_relaxation_bound` is the entry point (also usable as an objective floor).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ppsched.solver.exact.frame import decimal_scale
from ppsched.solver.exact.work_limit import MIN_WORK, set_limits
from ppsched.solver.model.bounds import memory_chain_bound, rank_span_bound, round_trip
from ppsched.solver.model.policy_fields import policy_fields
from ppsched.solver.model.problem import Problem

# Relative slack of the safe rounding: a float product may land a hair above the true
# one, so durations and memory are scaled by (1 + _FUZZ) before rounding down and the
# limit by (1 + 2 _FUZZ) (see `SafeScale`).
_FUZZ = 1e-9
# The simulator lets a rank hold this much over its limit (solver/sim/simulator.py).
MEMORY_EPS = 1e-9
# Scales tried for the exact case, then the one used otherwise (rounding down then loses
# less than one tick per op, at most 1e-4 time units).
_MAX_TIME_SCALE = 10**4
_MAX_MEMORY_SCALE = 10**6


@dataclass(frozen=True)
class SafeScale:
    """Integer ticks and memory units that only loosen the relaxation.

    Times round down and the model's objective is read back with one more factor
    (1 + _FUZZ), so a real schedule's times, scaled by ``time_scale (1 + _FUZZ)`` and
    rounded down, solve the integer model: its optimum never exceeds the real span.
    Memory demands round down and the limit up (with the simulator's tolerance), so every
    real memory state fits the integer limit.
    """

    time_scale: int
    memory_scale: int

    def ticks(self, time_units: float) -> int:
        """A duration or release in ticks, never above ``time_units * time_scale (1 +
        _FUZZ)``."""
        return max(0, math.floor(time_units * self.time_scale * (1 + _FUZZ)))

    def bound_in_time_units(self, ticks: float) -> float:
        """A proven bound in ticks, back in time units, on the safe side."""
        return ticks / (self.time_scale * (1 + _FUZZ))

    def demand(self, memory: float) -> int:
        """Memory held, in units, never above ``memory * memory_scale (1 + _FUZZ)``."""
        return max(0, math.floor(memory * self.memory_scale * (1 + _FUZZ)))

    def capacity(self, limit: float) -> int:
        """A rank's limit in units, at least any sum of `demand` that fits the real
        limit (plus the simulator's tolerance)."""
        return math.floor((limit + MEMORY_EPS) * self.memory_scale * (1 + 2 * _FUZZ))


def safe_scale(problem: Problem, rank: int) -> SafeScale:
    """The smallest powers of ten that make the rank's numbers whole (exact, but for the
    fuzz), or the largest tried."""
    s = rank
    return scale_for([problem.t_f[s], problem.t_b[s], problem.t_w[s], round_trip(problem, s)],
                     [problem.m_b[s], problem.m_w[s], problem.memory_limit[rank]])


def scale_for(times: list[float], memory: list[float]) -> SafeScale:
    """The smallest powers of ten that make `times` and `memory` whole, or the largest
    tried."""
    time_scale = decimal_scale(times) or _MAX_TIME_SCALE
    memory_scale = decimal_scale(memory) or _MAX_MEMORY_SCALE
    return SafeScale(min(time_scale, _MAX_TIME_SCALE), min(memory_scale, _MAX_MEMORY_SCALE))


def applies(problem: Problem) -> bool:
    """Where the relaxation below is proven: one stage per rank, alike microbatches (the
    exchange argument needs them), no activation policy and no overlapped FB gain."""
    return (problem.num_chunks == 1 and problem.uniform_microbatches
            and not policy_fields(problem).any and problem.overlap >= 1)


def memory_binds(problem: Problem, rank: int) -> bool:
    """Whether the rank cannot hold all its microbatches' activations at once: only then
    is its memory rule kept, and only from such a rank is a relaxation solved (elsewhere
    the round trip of `bounds.rank_span_bound` is what the relaxation would see)."""
    s = rank
    limit = problem.memory_limit[rank]
    return math.isfinite(limit) and problem.num_microbatches * problem.m_b[s] > limit + \
        MEMORY_EPS


@dataclass(frozen=True)
class RankBound:
    """What CP-SAT proved for one window of ranks."""

    first: int  # the window's first rank (its span is measured from its first op)
    num_ranks: int  # ranks kept whole, from `first` on
    bound: float  # time units, proven; 0.0 when CP-SAT proved nothing in time
    optimal: bool  # CP-SAT closed the relaxation
    wall_s: float
    ticks: int  # the proven span of rank `first` in ticks of `time_scale`
    time_scale: int
    work: float = 0.0  # CP-SAT's deterministic time (`solver.exact.work_limit`)


def rank_relaxation_bound(problem: Problem, first: int, num_ranks: int = 1, *,
                          deterministic_s: float = 10.0, time_limit_s: float | None = None,
                          workers: int = 1, scale: SafeScale | None = None,
                          at_least: RankBound | None = None) -> RankBound:
    """A lower bound on the cost over every valid schedule (one stage per rank, alike
    microbatches, `applies`), proven by CP-SAT on a relaxation that keeps the ranks
    ``first .. first + num_ranks - 1`` whole and the rest of the pipeline as a delay.

    The relaxation keeps, for each kept rank r (stage r), with times taken from the first
    op of rank `first`: F(r, j) no earlier than F(r - 1, j)'s end plus the latency (for
    r = first, no earlier than 0); B(r, j) no earlier than B(r + 1, j)'s end plus the
    latency, and for the window's last rank no earlier than `round_trip` after F(r, j)
    starts (F runs down the pipeline and B comes back up, each op and latency at least its
    own time); W(r, j) after B(r, j) ends; each rank runs one op at a time; and the memory
    rule exactly: microbatch j holds m_b from F(r, j) until B(r, j) starts, then m_w until
    W(r, j) starts, within the rank's limit. Every valid schedule, timed from the first
    op of rank `first`, satisfies all of it (an FB or BW op runs its parts back to back:
    F then B then W with the same memory steps, or less held when m_w <= m_b), so the cost,
    at least the span of rank `first`, is at least the relaxation's least span of that
    rank. The later ranks of the window only delay its Bs (their own memory rule holds
    their Fs back). `at_least`, this rank's bound already proven (alone, say), may be
    given as a floor: it only helps CP-SAT prune.

    With m_w > m_b a fused BW holds less than B then W would: the relaxation then counts
    m_b from F(r, j) until W(r, j) starts, which is no more than any schedule holds.

    Symmetry (why F, B and W may each be taken in microbatch order): the memory a rank
    holds depends only on how many of its F, B and W have started, and the ops of one
    kind on one rank all take the same time. Take any solution and sort the starts of each
    kind on each rank. Every link above says "each op of a sequence X starts at least d
    after its own microbatch's op in a sequence Y", a bijection between the two; among
    the k earliest of X each is d after its own op of Y, so at least k ops of Y start d
    or more before the k-th of X: the k-th of Y does. So giving the k-th of every sorted
    sequence the label k keeps every link, while the starts (so the spans, the one-at-a-
    time rule and the memory held) are unchanged: F(r, k), B(r, k), W(r, k) in k order
    lose nothing, and each rank's last op is its W(r, m - 1).

    CP-SAT gets the ranks in ticks rounded down (`SafeScale`); its proven objective bound
    is read back on the safe side, so stopping early (``deterministic_s``, or
    ``time_limit_s`` of wall time) only weakens the bound; so does a coarser `scale`.
    """
    began = time.perf_counter()
    from ortools.sat.python import cp_model  # OR-Tools is imported only when asked for

    m = problem.num_microbatches
    ranks = range(first, first + num_ranks)
    last = ranks[-1]
    scale = scale or _window_scale(problem, ranks)
    f = {r: scale.ticks(problem.t_f[r]) for r in ranks}
    b = {r: scale.ticks(problem.t_b[r]) for r in ranks}
    w = {r: scale.ticks(problem.t_w[r]) for r in ranks}
    comm = {r: scale.ticks(problem.t_comm[r]) for r in ranks if r < last}
    trip = scale.ticks(round_trip(problem, last))
    # Microbatch after microbatch solves the model within `serial` ticks, so its optimum
    # is at most that; a schedule that costs less keeps every kept rank's ops within
    # twice its cost of the origin (a later rank's first op comes before the B it sends
    # back to rank `first`, and its span is at most the cost): twice `serial` loses none.
    serial = sum(m * (f[r] + b[r] + w[r]) for r in ranks) + m * trip \
        + 2 * m * sum(comm.values())
    horizon = 2 * serial + 1

    model = cp_model.CpModel()
    starts: dict[int, RankStarts] = {}
    for r in ranks:
        # Intervals.
        rank = RankStarts(
            [model.new_int_var(0, horizon, f"f_{r}_{k}") for k in range(m)],
            [model.new_int_var(0, horizon, f"b_{r}_{k}") for k in range(m)],
            [model.new_int_var(0, horizon, f"w_{r}_{k}") for k in range(m)])
        starts[r] = rank
        model.add_no_overlap([
            model.new_fixed_size_interval_var(var, size, f"{kind}_{r}_{k}")
            for kind, seq, size in (("F", rank.f, f[r]), ("B", rank.b, b[r]),
                                     ("W", rank.w, w[r]))
            for k, var in enumerate(seq)])
        # Precedences on the rank (each kind in microbatch order: the symmetry).
        for k in range(m):
            model.add(rank.w[k] >= rank.b[k] + b[r])
            if k + 1 < m:
                model.add(rank.f[k + 1] >= rank.f[k] + f[r])
                model.add(rank.b[k + 1] >= rank.b[k] + b[r])
                model.add(rank.w[k + 1] >= rank.w[k] + w[r])
        end = model.new_int_var(0, horizon, f"end_{r}")
        model.add(end == rank.w[m - 1] + w[r])
        # Memory.
        if memory_binds(problem, r):
            d_b = scale.demand(problem.m_b[r])
            d_w = min(scale.demand(problem.m_w[r]), d_b)  # m_w > m_b: held as m_b
            add_memory_rule(model, rank, end, (f[r], b[r], w[r]), d_b, d_w,
                        scale.capacity(problem.memory_limit[r]))
    # Precedences between the ranks, and the rest of the pipeline as a round trip.
    model.add(starts[first].f[0] == 0)
    for r in ranks:
        for k in range(m):
            if r < last:
                model.add(starts[r + 1].f[k] >= starts[r].f[k] + f[r] + comm[r])
                model.add(starts[r].b[k] >= starts[r + 1].b[k] + b[r + 1] + comm[r])
            else:
                model.add(starts[r].b[k] >= starts[r].f[k] + trip)
    # Objective: the span of rank `first` (its first op is the origin, so a real span
    # maps to its ticks rounded down; another rank's span, the difference of two rounded
    # times, could map one tick above its own).
    span = model.new_int_var(0, horizon, "span")
    model.add(span == starts[first].w[m - 1] + w[first])
    if at_least is not None and at_least.first == first:
        # Rank `first`'s span, already proven: every real span maps to at least its ticks
        # at the same scale, or (another scale) to its bound rounded down without the
        # fuzz, so a float product a hair high cannot pass a real span's ticks.
        model.add(span >= (at_least.ticks if at_least.time_scale == scale.time_scale
                           else math.floor(at_least.bound * scale.time_scale)))
    model.minimize(span)
    return prove_span(model, first, num_ranks, scale, began, deterministic_s=deterministic_s,
                      time_limit_s=time_limit_s, workers=workers)


def prove_span(model: Any, first: int, num_ranks: int, scale: SafeScale, began: float, *,
               deterministic_s: float, time_limit_s: float | None,
               workers: int) -> RankBound:
    """Solve a relaxation that minimises rank `first`'s span in ticks of `scale`, and
    read back what CP-SAT proved (not what it found) on the safe side; `began` is when
    the caller started building it."""
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    set_limits(solver.parameters, wall_s=time_limit_s, work=deterministic_s, workers=workers)
    status = solver.solve(model)
    # The model always has a solution (one microbatch after another fits any valid
    # limit), and CP-SAT's objective bound holds even before it finds one.
    ticks = max(0, math.ceil(solver.best_objective_bound - 1e-6)) \
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.UNKNOWN) else 0
    return RankBound(first, num_ranks, scale.bound_in_time_units(ticks),
                     status == cp_model.OPTIMAL, time.perf_counter() - began, ticks,
                     scale.time_scale, solver.deterministic_time)


@dataclass(frozen=True)
class RankStarts:
    f: list[Any]  # IntVar starts of F(r, k), k = 0 .. m - 1
    b: list[Any]
    w: list[Any]


def _window_scale(problem: Problem, ranks: range) -> SafeScale:
    """`safe_scale` over several ranks: the largest of their scales."""
    scales = [safe_scale(problem, r) for r in ranks]
    return SafeScale(max(x.time_scale for x in scales), max(x.memory_scale for x in scales))


def add_memory_rule(model: Any, rank: RankStarts, end: Any, times: tuple[int, int, int],
                    d_b: int, d_w: int, capacity: int, other_before: Sequence[int] = (),
                    other_after: Sequence[int] = ()) -> None:
    """The memory rule at each F's start (B and W only free memory, as d_w <= d_b), with
    order literals "B(i) runs before F(k)" and "W(i) runs before F(k)", and energy cuts
    on what runs before and after each F; `other_before[k]` (`other_after[k]`) is the
    time the rank's other ops surely take before (after) F(k), where it has others."""
    f, b, w = times
    m = len(rank.f)
    num_f_fit = capacity // d_b if d_b > 0 else m
    for k in range(m):
        # Just after F(k) starts, with nb Bs and nw Ws run before it, the rank holds
        # (k + 1) d_b - (d_b - d_w) nb - d_w nw. As nw <= nb, nb >= k + 1 - capacity/d_b:
        # the Bs below lo_b run before F(k) in every solution; only a window is a choice.
        lo_b = max(0, k + 1 - num_f_fit)
        if lo_b > 0:
            model.add(rank.b[lo_b - 1] + b <= rank.f[k])
        before_b = _order_literals(model, rank.b, b, rank.f[k], f, lo_b, k, f"x_{k}")
        # As nb <= k, nw >= k - (capacity - d_b) / d_w: likewise for the Ws.
        lo_w = 0 if d_w == 0 else max(0, k - (capacity - d_b) // d_w)
        if d_w > 0 and lo_w > 0:
            model.add(rank.w[lo_w - 1] + w <= rank.f[k])
        before_w = [] if d_w == 0 else _order_literals(
            model, rank.w, w, rank.f[k], f, lo_w, k, f"y_{k}")
        num_b = lo_b + sum(before_b)
        num_w = lo_w + sum(before_w)
        model.add((k + 1) * d_b - (d_b - d_w) * num_b - d_w * num_w <= capacity)
        # Energy: the rank ran k Fs and those Bs and Ws before F(k), and runs the rest
        # after it. Without W literals (d_w = 0) num_w is 0, which undercounts the Ws
        # before; after F(k) only W(k) .. W(m - 1) are sure (their Fs come later).
        before = other_before[k] if other_before else 0
        after = other_after[k] if other_after else 0
        model.add(rank.f[k] >= k * f + b * num_b + w * num_w + before)
        w_after = m - num_w if d_w > 0 else m - k
        model.add(end >= rank.f[k] + (m - k) * f + (m - num_b) * b + w_after * w + after)


def _order_literals(model: Any, seq: list[Any], size: int, f_k: Any, f: int, lo: int,
                    hi: int, name: str) -> list[Any]:
    """Literals "op i of `seq` runs before F(k)" for lo <= i < hi, monotone in i (the
    sequence is sorted); op i >= hi runs after F(k) (its F(i) does)."""
    literals: list[Any] = []
    for i in range(lo, hi):
        lit = model.new_bool_var(f"{name}_{i}")
        model.add(seq[i] + size <= f_k).only_enforce_if(lit)
        model.add(f_k + f <= seq[i]).only_enforce_if(~lit)
        if literals:
            model.add_implication(lit, literals[-1])
        literals.append(lit)
    return literals


def memory_relaxation_bound(problem: Problem, *, time_limit_s: float,
                            deterministic_s: float | None = None, workers: int = 1,
                            stop_at: float = math.inf, work_limit: float | None = None,
                            ) -> float:
    """The largest relaxation bound (`rank_relaxation_bound`) over the ranks whose limit
    binds, within `time_limit_s` of wall time; 0.0 where it does not apply.

    It holds over every valid schedule (DESIGN.md section 3), so it may be combined with
    `solver.bounds.lower_bound` by max. Each binding rank alone first, in order of its
    closed-form bound (the first usually gives the most), each with half the time left,
    but for those another rank's relaxation dominates (`_dominates`); then the best rank
    with its downstream neighbour kept whole too, with the rest of the time
    (gpt1.5b-p8-m24 at limit 6: 1471.5 alone, 1479.3 with rank 1). It stops once
    the bound reaches `stop_at` (a known schedule's cost: no bound can pass it).
    ``deterministic_s`` caps each CP-SAT run reproducibly as well; ``work_limit`` is a
    deterministic budget for them all, shared as the time is (`time_limit_s` may then be
    math.inf: the wall clock decides nothing).
    """
    return max((r.bound for r in relaxation_runs(
        problem, time_limit_s=time_limit_s, deterministic_s=deterministic_s,
        workers=workers, stop_at=stop_at, work_limit=work_limit)), default=0.0)


def _dominates(problem: Problem, rank: int, other: int) -> bool:
    """Whether `other`'s one-rank relaxation is a looser copy of `rank`'s: the same op
    times and memory, a limit no lower and a round trip no longer. Its optimum is then no
    higher, and solving it is wasted (identical stages: rank 0 dominates every rank)."""
    same = all(getattr(problem, x)[rank] == getattr(problem, x)[other]
               for x in ("t_f", "t_b", "t_w", "m_b", "m_w"))
    return same and problem.memory_limit[other] >= problem.memory_limit[rank] \
        and round_trip(problem, other) <= round_trip(problem, rank)


def relaxation_runs(problem: Problem, *, time_limit_s: float,
                    deterministic_s: float | None = None, workers: int = 1,
                    stop_at: float = math.inf, work_limit: float | None = None,
                    ) -> list[RankBound]:
    """The CP-SAT runs of `memory_relaxation_bound`, in order (for a benchmark to show)."""
    if not applies(problem):
        return []
    deadline = time.perf_counter() + time_limit_s  # math.inf: no wall limit
    ranks = sorted((r for r in range(problem.num_ranks) if memory_binds(problem, r)),
                   key=lambda r: -max(rank_span_bound(problem, r),
                                      memory_chain_bound(problem, r)))
    runs: list[RankBound] = []

    def best() -> RankBound | None:
        return max(runs, key=lambda x: x.bound, default=None)

    def run(first: int, num_ranks: int, share: float) -> None:
        left = deadline - time.perf_counter() if math.isfinite(deadline) else math.inf
        work = math.inf if work_limit is None else work_limit - sum(x.work for x in runs)
        top = best()
        if left <= 0 or work < MIN_WORK or (top is not None and top.bound >= stop_at - 1e-9):
            return
        runs.append(rank_relaxation_bound(
            problem, first, num_ranks, deterministic_s=min(deterministic_s or math.inf,
                                                           work * share),
            time_limit_s=left * share, workers=workers, at_least=top))

    solved: list[int] = []
    for r in ranks:
        if any(_dominates(problem, s, r) for s in solved):
            continue
        run(r, 1, 0.5)
        solved.append(r)
    top = best()
    if top is not None and top.first + 1 < problem.num_ranks:
        run(top.first, 2, 1.0)
    return runs
