"""When a list-scheduling build (the heuristic's, the paper algorithm's) can give up.

A build places ops one after another, each after its input, so it can bound from below
how early each stage can end at best (`stage_floors`). Once that floor shows the build cannot
beat the best found so far, finishing it cannot change the answer: the search keeps only
builds better by `MARGIN`. After the warm-up the busiest stage rarely idles again
except while the pipeline drains, which the floor foresees, so on the paper's profiles a
losing build is mostly known after a wave or two (issue 11: the knob search's builds at
p=32, m=256 cost 10x less).
"""

from __future__ import annotations

from collections.abc import Sequence

from ppsched.solver.model.bounds import round_trip
from ppsched.solver.model.problem import Problem

MARGIN = 1e-9
"""How much better than the incumbent a build must be to replace it."""
ROUNDING = 1e-9
"""Relative slack of `idle_cap`: far above the rounding of a stage's sums of op times."""


def is_checkpoint(wave: int, num_waves: int) -> bool:
    """Whether a build asks at `wave` if it can still win: waves 1, 2, 4, 8, ... and as
    many before the end (a check costs a pass over the stages; most answers are known
    after wave 1, and the rest while the pipeline drains)."""
    left = num_waves - wave
    return (wave > 0 and wave & (wave - 1) == 0) or (left > 0 and left & (left - 1) == 0)


def stage_floors(free: Sequence[float], num_f: Sequence[int], num_b: Sequence[int],
                 num_w: Sequence[int], f_end: Sequence[Sequence[float]],
                 b_end: Sequence[Sequence[float]], t_f: Sequence[float],
                 t_b: Sequence[float], t_w: Sequence[float], t_comm: Sequence[float],
                 fused: Sequence[bool] | None = None,
                 num_microbatches: int | None = None) -> list[float]:
    """Per stage (= rank), a time it cannot end before, for a single-chunk build that has
    placed `num_f`, `num_b`, `num_w` ops of each kind (in microbatch order) and whose
    stage clocks are at `free`; `f_end`, `b_end`: the ends of the placed Fs and Bs (a
    row per stage, as long as `num_microbatches`, which is their length if not given).

    Two floors, the larger holds: the clock plus the work still owed; and the end of the
    last B, whose chain runs through the last F of every stage down the pipeline and the
    last B of every stage back up (each no earlier than its clock plus the Fs and Bs it
    owes before it), followed by its W. With `fused` stages a backward is a BW (B and W
    in one op, no W after it).
    """
    p = len(free)
    m = len(f_end[0]) if num_microbatches is None else num_microbatches
    # (Conditional expressions rather than max(): this runs at every checkpoint.)
    last_f = 0.0  # no earlier than F(j, m-1) ends, down the pipeline
    for j in range(p):
        left_f = m - num_f[j]
        if left_f == 0:
            last_f = f_end[j][m - 1]
        else:
            own = free[j] + left_f * t_f[j]
            chained = last_f + t_comm[j - 1] + t_f[j] if j > 0 else own
            last_f = chained if chained > own else own
    floors = [0.0] * p
    last_b = 0.0  # no earlier than B(j, m-1) ends, up the pipeline
    for j in range(p - 1, -1, -1):
        is_fused = fused[j] if fused is not None else False
        t_back = t_b[j] + t_w[j] if is_fused else t_b[j]
        left_f, left_b, left_w = m - num_f[j], m - num_b[j], m - num_w[j]
        if left_b == 0:
            last_b = b_end[j][m - 1]
        else:
            own = free[j] + left_f * t_f[j] + left_b * t_back
            chained = (last_f if j == p - 1 else last_b + t_comm[j]) + t_back
            last_b = chained if chained > own else own
        by_work = free[j] + (left_f * t_f[j] + left_b * t_b[j] + left_w * t_w[j])
        by_chain = last_b + t_w[j] if left_w and not is_fused else last_b  # then W(j, m-1)
        floors[j] = by_chain if by_chain > by_work else by_work
    return floors


def cannot_win(ends: Sequence[float], first: Sequence[float], objective: str,
               incumbent: float) -> bool:
    """Whether a build whose stages end no earlier than `ends` (and started at `first`)
    cannot end `MARGIN` below `incumbent` by `objective` (``cost``: the largest span;
    ``makespan``: last end to first start).

    Half the margin is kept as slack, so the rounding of the floor's sums cannot make a
    build give up that would have been kept.
    """
    if objective == "makespan":
        value = max(ends) - min(first)
    else:
        value = max([end - start for end, start in zip(ends, first, strict=True)])
    return value >= incumbent - MARGIN / 2


def idle_cap(incumbent: float) -> float:
    """The op time plus idle time of one stage past which a single-chunk build cannot
    beat `incumbent` (by cost, nor by makespan, which is at least the cost).

    A stage's span is its op time plus the time it idles between its first op and its
    last, so once one stage has idled that much, finishing the build cannot change the
    answer. Unlike `stage_floors` this needs no pass over the stages: a build checks it
    whenever a stage idles, and gives up at that op rather than at the next checkpoint
    (issue 11: the warm-up refinement's losing builds idle too long half-way, and the
    checkpoints saw it only at two thirds of their waves). The slack is relative, so the
    rounding of the two sums never makes a build give up that would have been kept.
    """
    return incumbent + ROUNDING * abs(incumbent) + MARGIN


def warm_up_floor(problem: Problem, warmup: Sequence[int]) -> float:
    """A cost (and makespan) no single-chunk order reaches in which rank r starts with
    F0, runs ``warmup[r]`` more Fs and then its first B, with F, B and W each in
    microbatch order (1F1B and ZB-H1 are such orders).

    Rank r's B0 starts at least a round trip after its F0 starts (`bounds.round_trip`),
    and until then the rank can only run forwards (a W follows its B): it idles at least
    the round trip less those forwards. Lets the heuristic drop a fixed order without
    generating it (issue 11: 1F1B and ZB-H1 lose by their warm-up's bubble on most
    profiles, and building them cost a tenth of a p=8 solve). Alike microbatches only;
    otherwise the rank's op time alone.
    """
    m = problem.num_microbatches
    floor = problem.simple_lower_bound
    if not problem.uniform_microbatches:
        return floor
    for r, count in enumerate(warmup):
        forwards = min(count + 1, m)
        idle = round_trip(problem, r) - forwards * problem.t_f[r]
        if idle > 0:
            floor = max(floor, problem.busy_per_rank[r] + idle)
    return floor
