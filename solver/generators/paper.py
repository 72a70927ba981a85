"""The Zero Bubble paper's automatic scheduling heuristic as the paper states it
(Qi et al. 2024, section 3.1), for one chunk per rank.

It is the floor under `solver.heuristic`: the heuristic takes these orders as candidates,
so it is never worse than the paper's algorithm. The rules, per wave of the 1F1B:

1. Warm-up: each stage runs as many forwards as memory allows before its first B can
   arrive (`overfill`: also the one F that ends after that arrival), and stage i runs at
   least one more F than stage i+1.
2. Main step: 1F1B; before an op whose input arrives later than the rank is free, Ws fill
   the gap: every W that fits, and one that overruns it when the gap is larger than the
   rank's share of the largest bubble so far (`greedy_w`: whenever the gap is not larger
   than that either). With `b_first`, a stage two Fs ahead of the next skips its F when
   it would delay the B the next stage sends back.
3. Whenever an F (or, with ``m_w > m_b``, a B) would break the memory limit, Ws free
   room first.
4. Cool-down: the remaining Ws.

The paper's reference tries the 8 combinations of the three flags and keeps the fastest;
`paper_candidates` yields them all. Every op is placed after its dependencies, so a
build's own timing is the simulator's (list scheduling, DESIGN.md section 3).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

from solver.generators import Orders
from solver.ops import Kind, Op
from solver.profile import Problem

_EPS = 1e-9
_KINDS: tuple[Kind, ...] = ("F", "B", "W")


@dataclass(frozen=True)
class PaperFlags:
    """The paper reference's three switches (section 3.1 leaves them open)."""

    overfill: bool
    b_first: bool
    greedy_w: bool


FLAGS = tuple(PaperFlags(*x) for x in itertools.product((True, False), repeat=3))


@dataclass(frozen=True)
class PaperBuild:
    """One run of the paper's algorithm: its orders and their cost and makespan."""

    orders: Orders
    cost: float
    makespan: float
    flags: PaperFlags


class _Infeasible(Exception):
    """The run cannot continue (memory, or an op before its input): not a candidate."""


def paper_candidates(problem: Problem) -> Iterator[PaperBuild]:
    """The paper's algorithm under each of its flag combinations that completes.

    A run that never read a flag would run identically with that flag flipped: such
    combinations are skipped (on most profiles only a few of the 8 differ).
    """
    done: list[tuple[PaperFlags, frozenset[str]]] = []
    for flags in FLAGS:
        if any(all(getattr(flags, name) == getattr(seen, name) for name in read)
               for seen, read in done):
            continue
        built, read = _paper_run(problem, flags)
        done.append((flags, read))
        if built is not None:
            yield built


def paper_zb(problem: Problem, objective: str = "cost") -> PaperBuild | None:
    """The best of `paper_candidates` by `objective` (None if none fits the limit)."""
    best: PaperBuild | None = None
    for built in paper_candidates(problem):
        value = built.makespan if objective == "makespan" else built.cost
        if best is None or value < (best.makespan if objective == "makespan"
                                    else best.cost) - _EPS:
            best = built
    return best


def paper_build(problem: Problem, flags: PaperFlags) -> PaperBuild | None:
    """One run of the algorithm with `flags`; None when it cannot fit the memory limit."""
    return _paper_run(problem, flags)[0]


def _paper_run(problem: Problem, flags: PaperFlags,
               ) -> tuple[PaperBuild | None, frozenset[str]]:
    """One run and the names of the flags it read."""
    if problem.num_chunks != 1:
        return None, frozenset()
    run = _Run(problem, flags)
    try:
        run.warm_up()
        for i in range(1, problem.num_microbatches):
            run.wave(i)
        run.cool_down()
    except _Infeasible:
        return None, frozenset(run.read)
    return run.result(), frozenset(run.read)


class _Run:
    """The state of one run: per stage (= rank), its counts, clock, memory and bubble."""

    def __init__(self, problem: Problem, flags: PaperFlags) -> None:
        self.problem, self.flags = problem, flags
        p, m = problem.num_ranks, problem.num_microbatches
        self.p, self.m = p, m
        self.count = [[0, 0, 0] for _ in range(p)]  # F, B, W placed per stage
        self.free = [0.0] * p  # when each stage's last op ends
        self.first = [math.nan] * p
        self.mem = [0.0] * p
        self.bubble = [0.0] * p  # idle time since the stage's first F
        self.f_end = [[math.nan] * m for _ in range(p)]
        self.b_end = [[math.nan] * m for _ in range(p)]
        self.orders: Orders = [[] for _ in range(p)]
        self.read: set[str] = set()  # the flags a decision depended on

    # Timing.

    def arrival(self, j: int, kind: int, x: int) -> float:
        """When the input of op `kind` (0 F, 1 B, 2 W) of microbatch x on stage j is there."""
        pr = self.problem
        if kind == 0:
            ready = self.f_end[j - 1][x] + pr.t_comm[j - 1] if j > 0 else 0.0
        elif kind == 1:
            ready = (self.b_end[j + 1][x] + pr.t_comm[j] if j < self.p - 1
                     else self.f_end[j][x])
        else:
            ready = self.b_end[j][x]
        if ready != ready:  # NaN: the input is not placed yet
            raise _Infeasible
        return ready

    def put(self, j: int, kind: int) -> None:
        pr = self.problem
        x = self.count[j][kind]
        start = max(self.free[j], self.arrival(j, kind, x))
        if self.count[j][0] > 0:
            self.bubble[j] += start - self.free[j]
        else:
            self.first[j] = start
        end = start + (pr.t_f, pr.t_b, pr.t_w)[kind][j]
        self.free[j] = end
        self.mem[j] += (pr.m_b[j], pr.m_w[j] - pr.m_b[j], -pr.m_w[j])[kind]
        if kind == 0:
            self.f_end[j][x] = end
        elif kind == 1:
            self.b_end[j][x] = end
        self.count[j][kind] = x + 1
        self.orders[j].append(Op(_KINDS[kind], j, x))

    def owed_w(self, j: int) -> bool:
        return self.count[j][2] < self.count[j][1]

    def room_for(self, j: int, need: float) -> None:
        """Ws until `need` more memory fits on stage j's rank."""
        limit = self.problem.memory_limit[j]
        while self.mem[j] + need > limit + _EPS:
            if not self.owed_w(j):
                raise _Infeasible
            self.put(j, 2)

    def fill(self, j: int, ready: float) -> None:
        """Ws into the idle time before `ready` (rule 2)."""
        t_w = self.problem.t_w[j]
        while self.owed_w(j) and self.free[j] + t_w <= ready + _EPS:
            self.put(j, 2)
        if self.owed_w(j) and self.free[j] < ready - _EPS:
            share = max(self.bubble) - self.bubble[j]
            if ready - self.free[j] > share:
                self.put(j, 2)
            else:
                self.read.add("greedy_w")
                if self.flags.greedy_w:
                    self.put(j, 2)

    # Phases.

    def warm_up(self) -> None:
        """Rule 1: the first F everywhere, the warm-up Fs, then the first B up the pipe."""
        pr, p, m = self.problem, self.p, self.m
        for j in range(p):
            self.room_for(j, pr.m_b[j])
            self.put(j, 0)
        extra = [0] * p
        last = self.f_end[p - 1][0] + pr.t_b[p - 1]  # when B(p-1, 0) ends
        for j in range(p - 2, -1, -1):
            mem, clock, arrive = self.mem[j], self.free[j], last + pr.t_comm[j]
            while 1 + extra[j] < m and mem + pr.m_b[j] <= pr.memory_limit[j] + _EPS:
                self.read.add("overfill")
                if self.flags.overfill:
                    if clock + pr.t_f[j] > arrive + _EPS:
                        break
                elif clock >= arrive - _EPS:
                    break
                mem += pr.m_b[j]
                clock += pr.t_f[j]
                extra[j] += 1
            last = max(clock, arrive) + pr.t_b[j]
        # Stage i runs at least one more F than stage i+1: trim the later one.
        for j in range(1, p):
            while extra[j] > 0 and extra[j] >= extra[j - 1] and 1 + extra[j] < m:
                extra[j] -= 1
        for j in range(p):
            for _ in range(extra[j]):
                self.room_for(j, pr.m_b[j])
                self.put(j, 0)
        for j in range(p - 1, -1, -1):
            self.put_b(j)

    def wave(self, i: int) -> None:
        """Rule 2 for wave i: an F per stage down the pipeline, B of microbatch i up."""
        pr, p, m = self.problem, self.p, self.m
        take = [self.count[j][0] < m for j in range(p)]
        for j in range(p - 1):
            if take[j] and self.count[j][0] >= self.count[j + 1][0] + 2:
                self.read.add("b_first")
                if self.flags.b_first:
                    take[j] = self._f_before_b(j)
        for j in range(p - 2, -1, -1):
            take[j] = take[j] and take[j + 1]
        for j in range(p):
            if take[j]:
                self.room_for(j, pr.m_b[j])
                if j > 0:
                    self.fill(j, self.arrival(j, 0, self.count[j][0]))
                self.put(j, 0)
        for j in range(p - 1, -1, -1):
            if self.count[j][1] != i:
                raise _Infeasible
            self.put_b(j)

    def _f_before_b(self, j: int) -> bool:
        """Whether stage j (two Fs ahead of j+1) still takes its F in this wave."""
        pr, nxt = self.problem, j + 1
        back = (self.free[nxt] + pr.t_f[nxt] + pr.t_b[nxt] + pr.t_comm[j])
        if self.free[j] >= back - _EPS:
            return False
        w_cost, w_done, mem = 0.0, self.count[j][2], self.mem[j] + pr.m_b[j]
        while mem > pr.memory_limit[j] + _EPS and w_done < self.count[j][1]:
            w_cost += pr.t_w[j]
            mem -= pr.m_w[j]
            w_done += 1
        if self.free[j] + pr.t_f[j] + w_cost <= back + _EPS:
            return True
        return back - self.free[j] > max(self.bubble) - self.bubble[j]

    def put_b(self, j: int) -> None:
        pr = self.problem
        x = self.count[j][1]
        if x >= self.count[j][0]:
            raise _Infeasible  # its F is not placed: the order would deadlock
        if pr.m_w[j] > pr.m_b[j]:
            self.room_for(j, pr.m_w[j] - pr.m_b[j])  # m_w > m_b (DESIGN.md 6.1)
        if j < self.p - 1:
            self.fill(j, self.arrival(j, 1, x))
        if j == 0 and self.count[0][0] == self.m:
            while self.owed_w(0):  # stage 0 feeds no one any more: idling never helps
                self.put(0, 2)
        self.put(j, 1)

    def cool_down(self) -> None:
        """Rule 4: the Ws still owed."""
        for j in range(self.p):
            while self.count[j][2] < self.m:
                self.put(j, 2)

    def result(self) -> PaperBuild:
        cost = max(self.free[j] - self.first[j] for j in range(self.p))
        return PaperBuild(self.orders, cost, max(self.free) - min(self.first), self.flags)
