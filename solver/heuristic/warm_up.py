"""Every heuristic build's warm-up, placed once.

A build of the knob search (`solver.heuristic.build`) starts by placing each stage's
warm-up forwards, stage by stage. Those ops do not depend on the knobs, only on their
counts: this module places the deepest warm-up once per search, and each build copies
the first counts of each stage (issue 11: the warm-up is most of what a losing build
places before it gives up).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ppsched.solver.heuristic import early_stop
from ppsched.solver.heuristic.early_stop import stage_floors
from ppsched.solver.model.problem import Problem

_EPS = 1e-9


@dataclass(frozen=True)
class Forwards:
    """Every build's warm-up, placed once: stage j running only forwards, F(j, x) after
    F(j-1, x) (`depth` of them per stage). A build whose warm-up counts never grow down
    the pipeline places exactly these ops at exactly these times (the same sums in the
    same order), so its warm-up is a copy of the first counts of each stage.

    Attributes:
        f_end: per stage, the end of each F.
        idle: per stage, the idle time since its first F, after each F.
        held: per stage, the memory held after each F.
        fits: per stage, how many Fs run before one breaks the memory limit.
        first: per stage, the start of its first F.
    """

    f_end: list[list[float]]
    idle: list[list[float]]
    held: list[list[float]]
    fits: list[int]
    first: list[float]

    def place(self, warmup: tuple[int, ...], f_end: list[list[float]], free: list[float],
              first: list[float], idle: list[float], held: list[float], num_f: list[int],
              codes: list[list[int]]) -> bool:
        """Copy the first `warmup` forwards of each stage into a build's state, as the
        build would place them (`covers` must hold); whether some stage's forwards break
        the memory limit."""
        over = False
        for j, count in enumerate(warmup):
            f_end[j][:count] = self.f_end[j][:count]
            free[j], first[j] = self.f_end[j][count - 1], self.first[j]
            idle[j], held[j] = self.idle[j][count - 1], self.held[j][count - 1]
            num_f[j] = count
            codes[j].extend(range(count))
            over = over or count > self.fits[j]
        return over

    def cannot_win(self, problem: Problem, warmup: tuple[int, ...], fused: tuple[bool, ...],
                   objective: str, incumbent: float) -> bool:
        """Whether a build with these warm-up counts (`covers` must hold) cannot beat
        `incumbent` once its warm-up is placed, by the floor a build checks at its
        checkpoints (`early_stop.stage_floors`), read off this table before the build
        allocates anything (issue 11: at p=8 the drain alone, the last microbatch's
        chain down and back up after the work each stage owes, stops most of the
        warm-up refinement's builds there)."""
        p = len(warmup)
        free = [row[k - 1] for row, k in zip(self.f_end, warmup, strict=True)]
        ends = stage_floors(free, warmup, [0] * p, [0] * p, self.f_end, (), problem.t_f,
                            problem.t_b, problem.t_w, problem.t_comm, fused or None,
                            num_microbatches=problem.num_microbatches)
        return early_stop.cannot_win(ends, self.first, objective, incumbent)

    def covers(self, warmup: tuple[int, ...]) -> bool:
        """Whether a build with these warm-up counts places a copy of these forwards."""
        depth = len(self.f_end[0])
        return all(1 <= k <= depth for k in warmup) and all(
            a >= b for a, b in itertools.pairwise(warmup))


def forwards_only(problem: Problem, depth: int) -> Forwards:
    """`Forwards` of `problem`, `depth` per stage, timed as `build` times its warm-up."""
    p = problem.num_ranks
    t_f, t_comm, m_b, limit = problem.t_f, problem.t_comm, problem.m_b, problem.memory_limit
    f_end = [[0.0] * depth for _ in range(p)]
    idle = [[0.0] * depth for _ in range(p)]
    held = [[0.0] * depth for _ in range(p)]
    fits, first = [depth] * p, [0.0] * p
    for j in range(p):
        free = waited = mem = 0.0
        for x in range(depth):
            ready = f_end[j - 1][x] + t_comm[j - 1] if j > 0 else 0.0
            if mem + m_b[j] > limit[j] + _EPS and fits[j] == depth:
                fits[j] = x  # F x breaks the limit (in a warm-up no W is owed)
            start = free if free > ready else ready
            if x == 0:
                first[j] = start
            elif start > free:
                waited += start - free
            free = f_end[j][x] = start + t_f[j]
            mem += m_b[j]
            idle[j][x], held[j][x] = waited, mem
    return Forwards(f_end, idle, held, fits, first)
