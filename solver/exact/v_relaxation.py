"""The memory relaxation of `solver.memory_relaxation` for two chunks per rank (the V and
the loop placement): one rank with both its stages kept whole, a lower bound over every
valid schedule of that layout.

Below 1F1B's memory the default solve also tries the V cut (issue 11), and there the
closed forms of `solver.bounds` know nothing of memory: on gpt14.6b-p16-m48 at limit 8
`--method ilp` printed a gap of 30% against a bound that holds with unlimited memory.
Rank r of a V placement runs stage a = r on the way down and stage c = 2p - 1 - r on the
way back (under the loop, r and r + p: one lap later; issue 27's default solve considers
the loop cut too and must bound it); this module keeps its six op sequences (F, B, W of
both stages), links them by the least time the rest of the pipeline can take between
them, keeps its memory rule exactly, and lets CP-SAT prove the least span of that rank.
"""

from __future__ import annotations

import math
import time
from typing import Any

from ppsched.solver.exact.memory_relaxation import (
    MEMORY_EPS,
    RankBound,
    RankStarts,
    SafeScale,
    add_memory_rule,
    prove_span,
    scale_for,
)
from ppsched.solver.exact.work_limit import MIN_WORK
from ppsched.solver.model.bounds import round_trip
from ppsched.solver.model.policy_fields import policy_fields
from ppsched.solver.model.problem import Problem


def applies(problem: Problem) -> bool:
    """Where the relaxation below is proven: two chunks in V or loop placement, alike
    microbatches, no activation policy and no overlapped FB gain."""
    return (problem.num_chunks == 2 and problem.placement in ("v", "loop")
            and problem.uniform_microbatches and not policy_fields(problem).any
            and problem.overlap >= 1)


def rank_stages(problem: Problem, rank: int) -> tuple[int, int]:
    """The rank's first stage a and its second c: under V, c is on the way back
    (2p - 1 - r); under the loop, one lap later (r + p). Either way the stages between
    them and those after c lie on other ranks, which is all the relaxation needs."""
    if problem.placement == "loop":
        return rank, rank + problem.num_ranks
    return rank, problem.num_stages - 1 - rank


def memory_binds(problem: Problem, rank: int) -> bool:
    """Whether the rank cannot hold every microbatch's activations of both its stages."""
    a, c = rank_stages(problem, rank)
    limit = problem.memory_limit[rank]
    return math.isfinite(limit) and \
        problem.num_microbatches * (problem.m_b[a] + problem.m_b[c]) > limit + MEMORY_EPS


def links(problem: Problem, rank: int) -> tuple[float, float, float]:
    """The least times the rest of the pipeline puts between the rank's ops of one
    microbatch: from F(a) starting to F(c) starting (F(a), then the forwards of the
    stages between, with their latencies), from F(c) starting to B(c) starting (the
    round trip below c) and from B(c) starting to B(a) starting (B(c), then the
    backwards of the stages between)."""
    a, c = rank_stages(problem, rank)
    boundaries = math.fsum(problem.comm(s, s + 1) for s in range(a, c))
    down = math.fsum(problem.t_f[a:c]) + boundaries
    up = math.fsum(problem.t_b[a + 1:c + 1]) + boundaries
    # Below c neither placement has a stage on this rank, so `round_trip`'s latencies are
    # real ones.
    return down, round_trip(problem, c), up


def _scale(problem: Problem, rank: int) -> SafeScale:
    """`memory_relaxation.scale_for` the rank's two stages, its links and its limit."""
    stages = rank_stages(problem, rank)
    times = [x for s in stages for x in (problem.t_f[s], problem.t_b[s], problem.t_w[s])]
    memory = [x for s in stages for x in (problem.m_b[s], problem.m_w[s])]
    return scale_for([*times, *links(problem, rank)], [*memory, problem.memory_limit[rank]])


def v_rank_relaxation_bound(problem: Problem, rank: int, *, deterministic_s: float = 10.0,
                            time_limit_s: float | None = None, workers: int = 1,
                            ) -> RankBound:
    """A lower bound on the cost over every valid V schedule (`applies`), proven by
    CP-SAT on a relaxation that keeps rank `rank` whole and the rest as delays.

    With times from the rank's first op (an F of stage a: every other op of the rank
    needs one before it), for every microbatch j: F(c, j) starts no earlier than `links`'
    first delay after F(a, j) starts, B(c, j) the second after F(c, j), B(a, j) the third
    after B(c, j); W(x, j) after B(x, j) ends; the rank runs one op at a time; and its
    memory: microbatch j holds m_b of stage x from F(x, j) until B(x, j) starts, then m_w
    until W(x, j) starts (m_b where m_w > m_b: a fused BW holds no more), the sum within
    the rank's limit at every moment (a cumulative resource). Every valid schedule
    satisfies it: the other ranks' ops only wait longer, and the simulator's memory,
    changed at op starts, is the same at every moment. So the cost, at least the rank's
    span, is at least the relaxation's least span.

    Each of the six sequences may be taken in microbatch order, as in
    `memory_relaxation.rank_relaxation_bound`: the ops of one sequence take the same time,
    every link is a bijection between two sequences with one delay, and the memory held
    depends only on how many ops of each sequence have started; sorting each sequence's
    starts keeps every link, the spans and the memory.

    CP-SAT gets the rank in ticks rounded down (`SafeScale`): a real schedule's times
    scaled and rounded down satisfy every link, keep the ops apart, and at each tick hold
    no more than the real schedule held just before the tick ends; the proven objective
    bound is read back on the safe side, so stopping early only weakens it.
    """
    began = time.perf_counter()
    from ortools.sat.python import cp_model  # OR-Tools is imported only when asked for

    m = problem.num_microbatches
    scale = _scale(problem, rank)
    stages = rank_stages(problem, rank)
    f = [scale.ticks(problem.t_f[s]) for s in stages]
    b = [scale.ticks(problem.t_b[s]) for s in stages]
    w = [scale.ticks(problem.t_w[s]) for s in stages]
    down, trip, up = (scale.ticks(x) for x in links(problem, rank))
    # One microbatch after another solves the model within `serial` ticks; a cheaper
    # schedule keeps the rank's ops within it.
    serial = m * (sum(f) + sum(b) + sum(w) + down + trip + up)
    horizon = serial + 1

    model = cp_model.CpModel()

    def sequence(name: str) -> list[Any]:
        return [model.new_int_var(0, horizon, f"{name}_{k}") for k in range(m)]

    fs, bs, ws = [sequence(f"f{x}") for x in (0, 1)], [sequence(f"b{x}") for x in (0, 1)], \
        [sequence(f"w{x}") for x in (0, 1)]
    model.add_no_overlap([
        model.new_fixed_size_interval_var(var, size[x], f"{kind}{x}_{k}")
        for kind, seqs, size in (("F", fs, f), ("B", bs, b), ("W", ws, w))
        for x in (0, 1) for k, var in enumerate(seqs[x])])
    for k in range(m):
        model.add(fs[1][k] >= fs[0][k] + down)
        model.add(bs[1][k] >= fs[1][k] + trip)
        model.add(bs[0][k] >= bs[1][k] + up)
        for x in (0, 1):
            model.add(ws[x][k] >= bs[x][k] + b[x])
            if k + 1 < m:  # each sequence in microbatch order (the symmetry above)
                model.add(fs[x][k + 1] >= fs[x][k] + f[x])
                model.add(bs[x][k + 1] >= bs[x][k] + b[x])
                model.add(ws[x][k + 1] >= ws[x][k] + w[x])
    span = model.new_int_var(0, horizon, "span")
    model.add_max_equality(span, [ws[x][m - 1] + w[x] for x in (0, 1)])
    if memory_binds(problem, rank):
        capacity = scale.capacity(problem.memory_limit[rank])
        intervals, demands = [], []
        for x, s in enumerate(stages):
            d_b = scale.demand(problem.m_b[s])
            d_w = min(scale.demand(problem.m_w[s]), d_b)
            for k in range(m):
                # m_b - m_w until B starts, m_w until W starts: m_b, then m_w.
                for until, demand in ((bs[x][k], d_b - d_w), (ws[x][k], d_w)):
                    if demand > 0:
                        size = model.new_int_var(0, horizon, f"held{x}_{k}_{demand}")
                        intervals.append(model.new_interval_var(fs[x][k], size, until,
                                                                f"mem{x}_{k}"))
                        demands.append(demand)
            # Each stage alone within the whole limit (the other one's activations only
            # take more): the one-stage rule, with its order literals and energy cuts,
            # which the cumulative alone propagates too weakly to prove much.
            add_memory_rule(model, RankStarts(fs[x], bs[x], ws[x]), span,
                            (f[x], b[x], w[x]), d_b, d_w, capacity,
                            *_other_work(x, m, f, b, w))
        model.add_cumulative(intervals, demands, capacity)
    model.add(fs[0][0] == 0)
    model.minimize(span)
    return prove_span(model, rank, 1, scale, began, deterministic_s=deterministic_s,
                      time_limit_s=time_limit_s, workers=workers)


def _other_work(x: int, m: int, f: list[int], b: list[int], w: list[int],
                ) -> tuple[list[int], list[int]]:
    """Per k, the time the other stage's ops surely take before and after F(x, k) on
    the rank. Before F(c, k): F(a, 0) .. F(a, k). After F(a, k): every op of stage c of
    microbatches k .. m - 1 (each after its F(a, i)); after F(c, k): B(a, i) and W(a, i)
    of those (each after its B(c, i))."""
    if x == 0:
        return [], [(m - k) * (f[1] + b[1] + w[1]) for k in range(m)]
    return [(k + 1) * f[0] for k in range(m)], [(m - k) * (b[0] + w[0]) for k in range(m)]


def v_relaxation_runs(problem: Problem, *, time_limit_s: float,
                      deterministic_s: float | None = None, workers: int = 1,
                      stop_at: float = math.inf, work_limit: float | None = None,
                      ) -> list[RankBound]:
    """The CP-SAT runs of `v_memory_relaxation_bound`, in order: each rank whose limit
    binds, from rank 0, each with all the time left, until the bound reaches `stop_at`.

    Rank 0's stages hold their activations longest, and its relaxation gave the largest
    bound of ranks 0, p/2 and p - 1 on gpt1.5b-p8-m24 and gpt14.6b-p16-m48 at 0.25p-0.75p;
    CP-SAT needs most of its time before it proves anything (gpt14.6b-p16-m48 at limit 4,
    two workers: nothing in 3 s, 3252.1 in 5 s), so halving the time for the next ranks
    would lose rank 0's bound. A later rank runs only when an earlier one closed early.
    ``work_limit``: a deterministic budget for all the runs, shared as the time is
    (`time_limit_s` may then be math.inf: the wall clock decides nothing).
    """
    if not applies(problem):
        return []
    deadline = time.perf_counter() + time_limit_s  # math.inf: no wall limit
    runs: list[RankBound] = []
    for rank in range(problem.num_ranks):
        left = deadline - time.perf_counter() if math.isfinite(deadline) else math.inf
        work = math.inf if work_limit is None else work_limit - sum(x.work for x in runs)
        if left <= 0 or work < MIN_WORK \
                or max((x.bound for x in runs), default=0.0) >= stop_at - 1e-9:
            break
        if memory_binds(problem, rank):
            runs.append(v_rank_relaxation_bound(
                problem, rank, deterministic_s=min(deterministic_s or math.inf, work),
                time_limit_s=left, workers=workers))
    return runs


def v_memory_relaxation_bound(problem: Problem, *, time_limit_s: float,
                              deterministic_s: float | None = None, workers: int = 1,
                              stop_at: float = math.inf, work_limit: float | None = None,
                              ) -> float:
    """The largest V relaxation bound over the ranks whose limit binds (0.0 where it
    does not apply); it holds over every valid schedule, like
    `memory_relaxation.memory_relaxation_bound`."""
    return max((r.bound for r in v_relaxation_runs(
        problem, time_limit_s=time_limit_s, deterministic_s=deterministic_s,
        workers=workers, stop_at=stop_at, work_limit=work_limit)), default=0.0)
