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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import cached_property

from ppsched.solver.heuristic.early_stop import cannot_win, idle_cap, is_checkpoint, stage_floors
from ppsched.solver.model.ops import Kind, Op, Orders
from ppsched.solver.model.problem import Problem

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
    """One run of the paper's algorithm: its orders and their cost and makespan.

    The run keeps its ops as ints (``kind * m + microbatch``, kinds F, B, W = 0, 1, 2)
    and makes `Op`s only when its orders are asked for: most candidates lose.
    """

    codes: list[list[int]]
    cost: float
    makespan: float
    flags: PaperFlags
    num_microbatches: int

    @cached_property
    def orders(self) -> Orders:
        m = self.num_microbatches
        return [[Op(_KINDS[c // m], j, c % m) for c in row] for j, row in enumerate(self.codes)]

    def objective(self, name: str) -> float:
        return self.makespan if name == "makespan" else self.cost


class _Infeasible(Exception):
    """The run cannot continue (memory, or an op before its input): not a candidate."""


class _CannotWin(Exception):
    """A stage of the run has idled so long that its span alone loses (`idle_cap`)."""


def paper_candidates(problem: Problem, objective: str = "cost",
                     incumbent: Callable[[], float] | None = None,
                     ) -> Iterator[PaperBuild]:
    """The paper's algorithm under each of its flag combinations that completes.

    A run that never read a flag would run identically with that flag flipped: such
    combinations are skipped (on most profiles only a few of the 8 differ).

    With `incumbent` (asked before each run: the caller's best so far, never rising), a
    run gives up, and is not yielded, once its `objective` provably cannot beat it
    (`solver.early_stop`). A skipped combination stays right: it would have run as the
    one it copies up to where that one gave up, and given up there too.
    """
    done: list[tuple[PaperFlags, frozenset[str]]] = []
    forks: dict[PaperFlags, _Fork] = {}
    for flags in FLAGS:
        if any(all(getattr(flags, name) == getattr(seen, name) for name in read)
               for seen, read in done):
            continue
        bar = incumbent() if incumbent is not None else math.inf
        fork = forks.pop(flags, None)
        start = fork.resumed(flags, bar) if fork is not None else None
        built, read, fork = _run_from(problem, flags, objective, bar, start)
        if fork is not None:
            forks[replace(flags, greedy_w=not flags.greedy_w)] = fork
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


def _paper_run(problem: Problem, flags: PaperFlags, objective: str = "cost",
               incumbent: float = math.inf) -> tuple[PaperBuild | None, frozenset[str]]:
    """One run and the names of the flags it read (None: it does not fit the limit, or
    it cannot beat a finite `incumbent`)."""
    built, read, _ = _run_from(problem, flags, objective, incumbent)
    return built, read


@dataclass(frozen=True)
class _Fork:
    """Where a run first read `greedy_w`: the wave it was in, the run's state at that
    wave's start (`_Run.save`) and the run itself, finished. The run with greedy_w
    flipped is the same up to there (issue 11: the flag is first read about 60% into a
    run at p=16, m=48, so it resumes there instead of starting over)."""

    wave: int
    saved: tuple
    run: _Run

    def resumed(self, flags: PaperFlags, incumbent: float) -> tuple[int, _Run]:
        return self.wave, self.run.resumed(self.saved, flags, incumbent)


def _run_from(problem: Problem, flags: PaperFlags, objective: str = "cost",
              incumbent: float = math.inf, start: tuple[int, _Run] | None = None,
              ) -> tuple[PaperBuild | None, frozenset[str], _Fork | None]:
    """`_paper_run`, from the start or from `start` (a wave and a run in the state at its
    start), and where it first read `greedy_w` (None if it never did, or in its warm-up).
    """
    if problem.num_chunks != 1:
        return None, frozenset(), None
    first_wave, run = start if start is not None else (1, _Run(problem, flags, incumbent))
    mark: tuple[int, tuple] | None = None  # the last wave start before greedy_w was read

    def fork() -> _Fork | None:
        return _Fork(mark[0], mark[1], run) if mark and "greedy_w" in run.read else None

    try:
        if start is None:
            run.warm_up()
        for i in range(first_wave, problem.num_microbatches):
            if "greedy_w" not in run.read:
                mark = (i, run.save())
            if math.isfinite(incumbent) and is_checkpoint(i, problem.num_microbatches) and \
                    cannot_win(run.floor_ends(), run.first, objective, incumbent):
                return None, frozenset(run.read), fork()
            run.wave(i)
        run.cool_down()
    except (_Infeasible, _CannotWin):
        return None, frozenset(run.read), fork()
    return run.result(), frozenset(run.read), fork()


class _Run:
    """The state of one run: per stage (= rank), its counts, clock, memory and bubble.

    Hot loop (issue 11: the paper's 8 runs cost as much as the reference heuristic):
    per-stage values live in flat lists, each kind has its own placing method, and the
    largest bubble is kept as it grows instead of recomputed.
    """

    def __init__(self, problem: Problem, flags: PaperFlags,
                 incumbent: float = math.inf) -> None:
        self.problem, self.flags = problem, flags
        p, m = problem.num_ranks, problem.num_microbatches
        self.p, self.m = p, m
        self.t_f, self.t_b, self.t_w = problem.t_f, problem.t_b, problem.t_w
        self.t_comm, self.m_b = problem.t_comm, problem.m_b
        self.m_w, self.limit = problem.m_w, problem.memory_limit
        self.m_wb = [w - b for w, b in zip(problem.m_w, problem.m_b, strict=True)]
        self.num_f, self.num_b, self.num_w = [0] * p, [0] * p, [0] * p
        self.free = [0.0] * p  # when each stage's last op ends
        self.first = [math.nan] * p
        self.mem = [0.0] * p
        self.bubble = [0.0] * p  # idle time since the stage's first F
        self.most_bubble = 0.0  # max(bubble): bubbles only grow, so kept as they do
        # A stage's span is its op time plus its bubble: past `idle_cap` the run loses
        # (issue 11: the second pass's runs that lose by a hair ran to the end before).
        cap = idle_cap(incumbent)
        self.bubble_cap = [cap - m * (problem.t_f[j] + problem.t_b[j] + problem.t_w[j])
                           for j in range(p)]
        self.f_end = [[math.nan] * m for _ in range(p)]
        self.b_end = [[math.nan] * m for _ in range(p)]
        self.codes: list[list[int]] = [[] for _ in range(p)]
        self.read: set[str] = set()  # the flags a decision depended on

    def save(self) -> tuple:
        """What of the state changes as ops are placed, but the ends and the ops, which
        are only ever appended to (`resumed` cuts them back)."""
        return (self.num_f[:], self.num_b[:], self.num_w[:], self.free[:], self.first[:],
                self.mem[:], self.bubble[:], self.most_bubble, frozenset(self.read))

    def resumed(self, saved: tuple, flags: PaperFlags, incumbent: float) -> _Run:
        """A run with `flags` (and `incumbent`) in the state this run was in when it
        `save`d: its ends and ops up to there are this run's, as each is set once."""
        run = _Run(self.problem, flags, incumbent)
        num_f, num_b, num_w, free, first, mem, bubble, most, read = saved
        run.num_f, run.num_b, run.num_w = list(num_f), list(num_b), list(num_w)
        run.free, run.first, run.mem, run.bubble = list(free), list(first), list(mem), \
            list(bubble)
        run.most_bubble, run.read = most, set(read)
        unset = [math.nan] * self.m
        run.f_end = [row[:n] + unset[n:] for row, n in zip(self.f_end, num_f, strict=True)]
        run.b_end = [row[:n] + unset[n:] for row, n in zip(self.b_end, num_b, strict=True)]
        run.codes = [row[:f + b + w] for row, f, b, w in
                     zip(self.codes, num_f, num_b, num_w, strict=True)]
        return run

    # Placing one op, after its input (an input not placed yet: the run cannot go on).

    def _start(self, j: int, ready: float) -> float:
        free = self.free[j]
        start = ready if ready > free else free
        if self.num_f[j] > 0:
            bubble = self.bubble[j] = self.bubble[j] + (start - free)
            if bubble > self.most_bubble:
                self.most_bubble = bubble
            if bubble > self.bubble_cap[j]:
                raise _CannotWin
        else:
            self.first[j] = start
        return start

    def put_f(self, j: int) -> None:
        x = self.num_f[j]
        ready = self.f_end[j - 1][x] + self.t_comm[j - 1] if j > 0 else 0.0
        if ready != ready:  # NaN: the input is not placed yet
            raise _Infeasible
        self.free[j] = self.f_end[j][x] = self._start(j, ready) + self.t_f[j]
        self.mem[j] += self.m_b[j]
        self.num_f[j] = x + 1
        self.codes[j].append(x)

    def _put_b(self, j: int) -> None:
        x = self.num_b[j]
        ready = self.b_end[j + 1][x] + self.t_comm[j] if j < self.p - 1 else self.f_end[j][x]
        if ready != ready:
            raise _Infeasible
        self.free[j] = self.b_end[j][x] = self._start(j, ready) + self.t_b[j]
        self.mem[j] += self.m_wb[j]
        self.num_b[j] = x + 1
        self.codes[j].append(self.m + x)

    def put_w(self, j: int) -> None:
        x = self.num_w[j]
        self.free[j] = self._start(j, self.b_end[j][x]) + self.t_w[j]  # its B is placed
        self.mem[j] -= self.m_w[j]
        self.num_w[j] = x + 1
        self.codes[j].append(2 * self.m + x)

    def arrival_f(self, j: int) -> float:
        """When the input of stage j's next F is there."""
        ready = self.f_end[j - 1][self.num_f[j]] + self.t_comm[j - 1] if j > 0 else 0.0
        if ready != ready:
            raise _Infeasible
        return ready

    def room_for(self, j: int, need: float) -> None:
        """Ws until `need` more memory fits on stage j's rank."""
        limit = self.limit[j]
        while self.mem[j] + need > limit + _EPS:
            if self.num_w[j] >= self.num_b[j]:  # no W owed
                raise _Infeasible
            self.put_w(j)

    def fill(self, j: int, ready: float) -> None:
        """Ws into the idle time before `ready` (rule 2)."""
        t_w, num_b, num_w, free = self.t_w[j], self.num_b, self.num_w, self.free
        while num_w[j] < num_b[j] and free[j] + t_w <= ready + _EPS:
            self.put_w(j)
        if num_w[j] < num_b[j] and free[j] < ready - _EPS:
            share = self.most_bubble - self.bubble[j]
            if ready - free[j] > share:
                self.put_w(j)
            else:
                self.read.add("greedy_w")
                if self.flags.greedy_w:
                    self.put_w(j)

    # Phases.

    def warm_up(self) -> None:
        """Rule 1: the first F everywhere, the warm-up Fs, then the first B up the pipe."""
        pr, p, m = self.problem, self.p, self.m
        for j in range(p):
            self.room_for(j, pr.m_b[j])
            self.put_f(j)
        extra = [0] * p
        last = self.f_end[p - 1][0] + pr.t_b[p - 1]  # when B(p-1, 0) ends
        for j in range(p - 2, -1, -1):
            mem, clock, arrive = self.mem[j], self.free[j], last + pr.t_comm[j]
            while 1 + extra[j] < m and mem + pr.m_b[j] <= pr.memory_limit[j] + _EPS:
                # With overfill the warm-up ends once an F would end after the arrival;
                # without, once the rank is there. Only where the two differ is the flag
                # read (a run that agrees at every such point is the other's copy).
                stop_overfill = clock + pr.t_f[j] > arrive + _EPS
                stop_plain = clock >= arrive - _EPS
                if stop_overfill != stop_plain:
                    self.read.add("overfill")
                if stop_overfill if self.flags.overfill else stop_plain:
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
                self.put_f(j)
        for j in range(p - 1, -1, -1):
            self.put_b(j)

    def wave(self, i: int) -> None:
        """Rule 2 for wave i: an F per stage down the pipeline, B of microbatch i up."""
        p, m, num_f = self.p, self.m, self.num_f
        take = [num_f[j] < m for j in range(p)]
        for j in range(p - 1):
            # With b_first the stage skips its F where `_f_before_b` says so; only
            # there does the flag decide (it is read whatever the flag, to know that).
            if take[j] and num_f[j] >= num_f[j + 1] + 2 and not self._f_before_b(j):
                self.read.add("b_first")
                if self.flags.b_first:
                    take[j] = False
        for j in range(p - 2, -1, -1):
            take[j] = take[j] and take[j + 1]
        for j in range(p):
            if take[j]:
                self.room_for(j, self.m_b[j])
                if j > 0:
                    self.fill(j, self.arrival_f(j))
                self.put_f(j)
        for j in range(p - 1, -1, -1):
            if self.num_b[j] != i:
                raise _Infeasible
            self.put_b(j)

    def _f_before_b(self, j: int) -> bool:
        """Whether stage j (two Fs ahead of j+1) still takes its F in this wave."""
        pr, nxt = self.problem, j + 1
        back = (self.free[nxt] + pr.t_f[nxt] + pr.t_b[nxt] + pr.t_comm[j])
        if self.free[j] >= back - _EPS:
            return False
        w_cost, w_done, mem = 0.0, self.num_w[j], self.mem[j] + pr.m_b[j]
        while mem > pr.memory_limit[j] + _EPS and w_done < self.num_b[j]:
            w_cost += pr.t_w[j]
            mem -= pr.m_w[j]
            w_done += 1
        if self.free[j] + pr.t_f[j] + w_cost <= back + _EPS:
            return True
        return back - self.free[j] > self.most_bubble - self.bubble[j]

    def put_b(self, j: int) -> None:
        """Stage j's next B, with the Ws rule 2 (and rule 3) put before it."""
        x = self.num_b[j]
        if x >= self.num_f[j]:
            raise _Infeasible  # its F is not placed: the order would deadlock
        if self.m_w[j] > self.m_b[j]:
            self.room_for(j, self.m_wb[j])  # m_w > m_b (DESIGN.md 6.1)
        if j < self.p - 1:
            ready = self.b_end[j + 1][x] + self.t_comm[j]
            if ready != ready:
                raise _Infeasible
            self.fill(j, ready)
        if j == 0 and self.num_f[0] == self.m:
            while self.num_w[0] < self.num_b[0]:  # stage 0 feeds no one any more:
                self.put_w(0)  # idling never helps
        self._put_b(j)

    def cool_down(self) -> None:
        """Rule 4: the Ws still owed."""
        for j in range(self.p):
            while self.num_w[j] < self.m:
                self.put_w(j)

    def floor_ends(self) -> list[float]:
        """Per stage, a time it cannot end before (`early_stop.stage_floors`)."""
        return stage_floors(self.free, self.num_f, self.num_b, self.num_w, self.f_end,
                            self.b_end, self.t_f, self.t_b, self.t_w, self.t_comm)

    def result(self) -> PaperBuild:
        cost = max(self.free[j] - self.first[j] for j in range(self.p))
        return PaperBuild(self.codes, cost, max(self.free) - min(self.first), self.flags,
                          self.m)
