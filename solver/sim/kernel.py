"""The timing kernel: the list-scheduling rules of DESIGN.md section 3, written once.

Every timer of ppsched times an order with these rules (STYLE.md, choice 3): the
simulator, the racing timers of the searches (`heuristic.chunked_timing`,
`heuristic.order_timing`) and the builders that extend an order op by op (the greedy, the
lookahead, through `Timeline`); the copy-lane timer (`sim.lanes`) reads the same rules
from `Tables` and `input_ready`. The heuristic's wave build (`heuristic.build`) and the
paper's algorithm (`heuristic.paper`) still keep their own clocks: their W fill reads
them at every decision, as plain lists (see `heuristic.build`). The rules:

- each rank runs its ops back to back, in its list's order;
- an op starts at ``max(its rank's clock, end of its dependency + t_comm across ranks)``:
  F(s, j) after F(s-1, j); B(s, j) (and BW) after B(s+1, j), on the last stage after
  F(s, j); W(s, j) after B(s, j). A BW ends its B and its W (a B above it or a W never
  tells them apart); an FB (DESIGN.md 6.4) waits for both its parts' inputs and ends
  both parts, taking ``overlap`` of their time;
- memory (optional): each op adds its delta to its rank; an order over the limit fails
  at its first op over it (an FB checks its F part before its BW part frees).

Ops are ints inside: ``kind * block + stage * m + microbatch`` (``block = S * m``, kinds
F, B, W, BW = 0..3), an FB ``4 * block + n`` with its parts' ids in ``pairs[n]``, and
``NO_OP`` a position to skip. A rank blocked on an op not yet timed waits in that op's
waiter list and is woken when it is timed, so the work is linear in the number of ops.

Racing (the searches' early stop): with a finite ``bound`` a rank's span is known to be at
least its op time plus the time it idled since its first op; once a rank's floor (or, by
makespan, its floor measured from the earliest start) reaches the bound, the order fails.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from itertools import chain, repeat

from ppsched.solver.model.problem import Problem

F, B, W, BW = range(4)
FB = 4
NO_OP = -1
"""A position the kernel skips."""
REFUSED, NOT_TIMEABLE = -2, -3
"""Positions that fail a run once reached: an op on the wrong rank, or one of a kind
the caller does not time (the run then fails with `WRONG_RANK` or `UNTIMED`)."""
KIND_INDEX = {"F": F, "B": B, "W": W, "BW": BW}
EPS = 1e-9
"""Memory tolerance: limits and m_b are floats; sums of them drift in the last bits."""

# Why a kernel run fails (None: it ran every op it could).
OVER_LIMIT, TWICE, CANNOT_WIN = "over the limit", "twice", "cannot win"
_WAIT = "wait"
WRONG_RANK, UNTIMED = "wrong rank", "not timeable"


class Tables:
    """A problem's rules and numbers by op id (see the module), built once per problem.

    Attributes:
        dep: the id of the op each op waits for (``NO_OP``: none), section 3's rules.
        lat: the latency after that op's end (``t_comm`` across ranks, else 0).
        dur: each op's time; delta: what it adds to its rank's memory.
    """

    __slots__ = ("S", "block", "delta", "dep", "dur", "lat", "m", "overlap")

    def __init__(self, problem: Problem) -> None:
        S, m = problem.num_stages, problem.num_microbatches
        block = S * m
        self.S, self.m, self.block = S, m, block
        # Per (stage, microbatch), indexed by ``stage * m + microbatch``: with alike
        # microbatches each stage's one number, repeated (the hot loops then read a few
        # float objects, not one per op: a V order's 49k ops touched megabytes of them).
        rows = _Rows(problem)
        # comm_down: latency of microbatch j from stage s to s+1 (0 on one rank, and
        # after the last stage).
        comm_down = rows.comm_down
        last_base = block - m
        # F(s, j) after F(s-1, j); B(s, j) after B(s+1, j), on the last stage after
        # F(s, j); W(s, j) after B(s, j); a BW as its B.
        after_b = [*range(block + m, 2 * block), *range(last_base, block)]
        self.dep = [NO_OP] * m + list(range(block - m)) + after_b \
            + list(range(block, 2 * block)) + after_b
        self.lat = [0.0] * m + comm_down[:last_base] + comm_down + [0.0] * block + comm_down
        self.dur = rows.of(lambda s, j: problem.t_f_mb[s][j]) \
            + rows.of(lambda s, j: problem.t_b_mb[s][j]) \
            + rows.of(lambda s, j: problem.t_w_mb[s][j]) \
            + rows.of(lambda s, j: problem.t_b_mb[s][j] + problem.t_w_mb[s][j])
        m_b, m_w = problem.m_b_mb, problem.m_w_mb
        self.delta = rows.of(lambda s, j: m_b[s][j]) \
            + rows.of(lambda s, j: m_w[s][j] - m_b[s][j]) \
            + rows.of(lambda s, j: -m_w[s][j]) + rows.of(lambda s, j: -m_b[s][j])
        self.overlap = problem.overlap


class _Rows:
    """Numbers per (stage, microbatch) as one list: each stage's microbatch 0 value,
    repeated, when the microbatches are alike; else each one's."""

    def __init__(self, problem: Problem) -> None:
        self.S, self.m = problem.num_stages, problem.num_microbatches
        self.alike = problem.uniform_microbatches
        self.comm_down = self.of(lambda s, j: problem.comm_mb(s, s + 1, j)
                                 if s < self.S - 1 else 0.0)

    def of(self, value: Callable[[int, int], float]) -> list[float]:
        S, m = self.S, self.m
        if self.alike:
            return list(chain.from_iterable(repeat(value(s, 0), m) for s in range(S)))
        return [value(s, j) for s in range(S) for j in range(m)]


def slot(x: int, block: int) -> int:
    """Where op `x`'s end is kept (`Kernel.end_of`): its own id; a BW's is its B's (a B
    of the stage above, or a W, waits for either alike), and it ends its W's too (so
    that a W beside it is an op twice)."""
    return x if x < 3 * block else x - 2 * block


_TABLES: dict[int, tuple[Problem, Tables]] = {}


def tables(problem: Problem) -> Tables:
    """The problem's `Tables` (kept for the last few problems: a search times many
    orders of one problem, and a loser stops within a few hundred ops)."""
    kept = _TABLES.get(id(problem))
    if kept is not None and kept[0] is problem:
        return kept[1]
    made = Tables(problem)
    if len(_TABLES) >= 8:
        _TABLES.pop(next(iter(_TABLES)))
    _TABLES[id(problem)] = (problem, made)
    return made


def forget_tables() -> None:
    """Drop the kept `Tables`: a solve's search is over once its answer is simulated, and
    at p=128, m=1024 the tables of its layouts held 130 MB through the building of the
    schedule's 786,432 ops (the solve's peak, issue 27)."""
    _TABLES.clear()


def input_ready(deps: Iterable[tuple[int, float]], end_of: Mapping[int, float],
                begin: float) -> float | None:
    """When an op with these inputs (keys of `end_of`, each with its latency) may start,
    at `begin` at the earliest; None while one of them is not timed. The kernel's loops
    inline this rule."""
    for dep, latency in deps:
        dep_end = end_of.get(dep)
        if dep_end is None:
            return None
        if dep_end + latency > begin:
            begin = dep_end + latency
    return begin


class Kernel:
    """One list scheduling of per-rank rows of op ids, advanced rank by rank.

    Attributes:
        rows: per rank, its op ids in order (a row may grow: see `pull`).
        pairs: per FB, its parts' ids (F, BW).
        end_of: per slot (`slot`), when its op ended (None: not timed).
        pointer: per rank, how many of its ops are timed (or skipped).
        free: per rank, when its last timed op ended.
        first: per rank, when its first op started (nan: not started).
        idle: per rank, how long it waited since its first op.
        held: per rank, its memory (tracked only with `limit`).
        waiters: per untimed slot, the ranks blocked on it.
        start, end: with `record`, per rank and position, the op's start and end.
    """

    def __init__(self, problem: Problem, rows: list[list[int]],
                 pairs: list[tuple[int, int]] | None = None, *,
                 limit: list[float] | None = None, strict: bool = False,
                 bound: float = math.inf, objective: str = "cost",
                 record: bool = False, pull: Callable[[int], bool] | None = None) -> None:
        """Args:
            limit: each rank's memory limit: an op over it fails the run.
            strict: with `limit`, an op timed twice (with a BW: its B) fails the run.
            bound: fail once a rank provably cannot end below it (see the module).
            record: keep each position's start and end (`start`, `end`).
            pull: called with a rank whose row is timed to its end: extends it and says
                whether it did (lazily generated orders).
        """
        self.t = tables(problem)
        p = len(rows)
        self.rows, self.pairs = rows, pairs if pairs is not None else []
        self.end_of: list[float | None] = [None] * (3 * self.t.block)
        self.waiters: dict[int, list[int]] = {}
        self.pointer, self.free = [0] * p, [0.0] * p
        self.first, self.idle = [math.nan] * p, [0.0] * p
        self.least_first = math.inf
        self.held = [0.0] * p
        self.limit = [x + EPS for x in limit] if limit is not None else None
        self.strict, self.pull = strict, pull
        self.busy = problem.busy_per_rank if math.isfinite(bound) else ()
        self.bound, self.makespan = bound, objective == "makespan"
        self.start: list[list[float | None]] = []
        self.end: list[list[float | None]] = []
        if record:
            self.start = [[None] * len(row) for row in rows]
            self.end = [[None] * len(row) for row in rows]
        self.ready = list(range(p))

    def run(self, checkpoint: Callable[[Kernel], bool] | None = None) -> str | None:
        """Time every op that can be timed; why the run failed, or None.

        Args:
            checkpoint: asked after ``p``, ``2p``, ``4p``, ... rank advances whether the
                order can still win (a caller's floor, stronger than the kernel's own);
                False fails the run with `CANNOT_WIN`.
        """
        ready, advance = self.ready, self.advance
        steps, ask_at = 0, len(self.rows)
        while ready:
            failed = advance(ready.pop())
            if failed is not None:
                return failed
            steps += 1
            if checkpoint is not None and steps == ask_at:
                ask_at *= 2
                if not checkpoint(self):
                    return CANNOT_WIN
        return None

    def advance(self, r: int) -> str | None:
        """Time rank `r`'s ops until one waits for an op not yet timed, or its row ends
        (and `pull` does not extend it); ranks this wakes join `ready`. Why the run
        fails, or None."""
        row, fb_base = self.rows[r], 4 * self.t.block
        while True:
            i = self.pointer[r]
            if i < len(row):
                x = row[i]
                failed = None
                if x < 0 or x >= fb_base:  # an FB, or a position to skip or fail at
                    failed = self._place_parts(r, x)
                elif i == 0:  # the rank's first op: its start is the rank's first
                    failed = self.place(r, x)
                if failed is not None:
                    if failed == _WAIT:
                        break
                    return failed
                failed = self._run(r)
                if failed is not None:
                    return failed
                i = self.pointer[r]
                if i < len(row) and 0 <= row[i] < fb_base:
                    break  # waiting for an input
                continue
            if self.pull is None or not self.pull(r):
                break
        if self.busy and self.pointer[r] and self.floor(r) >= self.bound:
            return CANNOT_WIN
        return None

    def _run(self, r: int) -> str | None:
        """The hot loop: rank `r`'s plain ops after its first, until one waits for its
        input, the row ends, or an op needs `_place_parts`. Why the run fails, or None."""
        t_ = self.t
        dep_of, lat, dur, delta = t_.dep, t_.lat, t_.dur, t_.delta
        end_of, waiters, ready = self.end_of, self.waiters, self.ready
        limit, strict = self.limit, self.strict
        lim = limit[r] if limit is not None else math.inf
        held, idle = self.held[r], self.idle[r]
        row, i, t = self.rows[r], self.pointer[r], self.free[r]
        st, en = (self.start[r], self.end[r]) if self.start else ([], [])
        n, block = len(row), t_.block
        b3, fb_base = 3 * block, 4 * block
        failed = None
        while i < n:
            x = row[i]
            if x < 0 or x >= fb_base:
                break
            begin = t
            dep = dep_of[x]
            if dep >= 0:
                dep_end = end_of[dep]
                if dep_end is None:
                    waiters.setdefault(dep, []).append(r)
                    break
                dep_end += lat[x]
                if dep_end > begin:
                    idle += dep_end - t
                    begin = dep_end
            t = begin + dur[x]
            if st:
                st[i] = begin
                en[i] = t
            # Its slot (`slot`): its own, a BW's that of its B (and its W's too).
            y = x if x < b3 else x - 2 * block
            if limit is not None:  # the racing timers: memory, and each op once
                held += delta[x]
                if held > lim or (strict and end_of[y] is not None):
                    failed = OVER_LIMIT if held > lim else TWICE
                    break
            if y != x:
                end_of[x - block] = t
            end_of[y] = t
            woken = waiters.pop(y, None)
            if woken:
                ready.extend(woken)
            i += 1
        self.pointer[r], self.free[r], self.held[r], self.idle[r] = i, t, held, idle
        return failed

    def place(self, r: int, x: int) -> str | None:
        """Time rank `r`'s next op (at its `pointer`), plain op `x`: the kernel's step
        for one op, which `advance` takes for a rank's first op; `_run` is this step,
        inlined in a loop, and `stepper` the same step for a builder, whose ops never
        wait. `_WAIT` when the op waits for its input; why the run fails, or None."""
        t_, end_of = self.t, self.end_of
        free = begin = self.free[r]
        dep = t_.dep[x]
        if dep >= 0:
            dep_end = end_of[dep]
            if dep_end is None:
                self.waiters.setdefault(dep, []).append(r)
                return _WAIT
            if dep_end + t_.lat[x] > begin:
                begin = dep_end + t_.lat[x]
        i = self.pointer[r]
        if i == 0:
            self._started(r, begin)
        elif begin > free:
            self.idle[r] += begin - free
        self.free[r] = end = begin + t_.dur[x]
        if self.start:
            self.start[r][i], self.end[r][i] = begin, end
        self.pointer[r] = i + 1
        y = slot(x, t_.block)
        if self.limit is not None:
            held = self.held[r] = self.held[r] + t_.delta[x]
            if held > self.limit[r]:
                return OVER_LIMIT
            if self.strict and end_of[y] is not None:
                return TWICE
        if y != x:  # a BW ends its W too
            end_of[x - t_.block] = end
        end_of[y] = end
        if self.waiters:  # (a builder's ops never wait: no dict call per op)
            woken = self.waiters.pop(y, None)
            if woken:
                self.ready.extend(woken)
        return None

    def stepper(self) -> Callable[[int, int], str | None]:
        """`place` for a builder (`Timeline`), which appends an op to a rank's order only
        after its input: no op waits, none is recorded or timed twice; and the race at
        every op (`floor`, inlined). A closure over the kernel's lists, which it reads as
        fast as local variables: this is the step of the builders' hot loops."""
        t_ = self.t
        dep_of, lat, dur, delta, block = t_.dep, t_.lat, t_.dur, t_.delta, t_.block
        end_of, free, first, idle, held = self.end_of, self.free, self.first, self.idle, \
            self.held
        limit = self.limit if self.limit is not None else [math.inf] * len(free)
        busy, bound, makespan, started = self.busy, self.bound, self.makespan, self._started
        b3 = 3 * t_.block

        def step(r: int, x: int) -> str | None:
            clock = begin = free[r]
            dep = dep_of[x]
            if dep >= 0:
                # (placed before it: never None)
                ready: float = end_of[dep]  # type: ignore[assignment]
                ready += lat[x]
                if ready > begin:
                    begin = ready
            if first[r] != first[r]:  # nan: the rank's first op
                started(r, begin)
            elif begin > clock:
                idle[r] += begin - clock
            free[r] = end = begin + dur[x]
            now_held = held[r] = held[r] + delta[x]
            if now_held > limit[r]:
                return OVER_LIMIT
            if x < b3:
                end_of[x] = end
            else:  # a BW: its B's slot and its W's
                end_of[x - 2 * block] = end_of[x - block] = end
            if busy:
                floor = busy[r] + idle[r]
                if makespan:
                    floor += first[r] - self.least_first
                if floor >= bound:
                    return CANNOT_WIN
            return None

        return step

    def _place_parts(self, r: int, x: int) -> str | None:
        """`place` for a position to skip or to fail at, and for an FB (both its parts'
        inputs, its parts' ends and memory)."""
        t_ = self.t
        i, t = self.pointer[r], self.free[r]
        if x < 0:
            if x != NO_OP:
                return WRONG_RANK if x == REFUSED else UNTIMED
            self.pointer[r] = i + 1
            return None
        parts: tuple[int, ...]
        if x >= 4 * t_.block:  # an FB: both parts' inputs, its parts' time
            parts = self.pairs[x - 4 * t_.block]
            took = t_.overlap * (t_.dur[parts[0]] + t_.dur[parts[1]])
        else:
            parts, took = (x,), t_.dur[x]
        begin = t
        for part in parts:
            dep = t_.dep[part]
            if dep == NO_OP:
                continue
            dep_end = self.end_of[dep]
            if dep_end is None:
                self.waiters.setdefault(dep, []).append(r)
                return _WAIT
            if dep_end + t_.lat[part] > begin:
                begin = dep_end + t_.lat[part]
        if i == 0:
            self._started(r, begin)
        else:
            self.idle[r] += begin - t
        self.free[r] = end = begin + took
        if self.start:
            self.start[r][i], self.end[r][i] = begin, end
        self.pointer[r] = i + 1
        return self._end(r, parts, end)

    def _end(self, r: int, parts: tuple[int, ...], end: float) -> str | None:
        """The memory and the ends of an op timed by `_place_parts` (an FB's F part is held
        before its BW part frees)."""
        for part in parts:
            y = slot(part, self.t.block)
            if self.limit is not None:
                self.held[r] += self.t.delta[part]
                if self.held[r] > self.limit[r]:
                    return OVER_LIMIT
                if self.strict and self.end_of[y] is not None:
                    return TWICE
            if y != part:  # a BW ends its W too
                self.end_of[part - self.t.block] = end
            self.end_of[y] = end
            woken = self.waiters.pop(y, None)
            if woken:
                self.ready.extend(woken)
        return None

    def _started(self, r: int, begin: float) -> None:
        """Rank `r`'s first op starts at `begin`."""
        self.first[r] = begin
        if begin < self.least_first:
            self.least_first = begin

    def floor(self, r: int) -> float:
        """How early rank `r` can end at best, measured from its first start (by
        makespan: from the earliest start of any rank): its op time and its idle time."""
        own = self.busy[r] + self.idle[r]
        if self.makespan:
            return self.first[r] - self.least_first + own
        return own

    def stuck(self) -> dict[int, tuple[int, int]]:
        """Per rank left blocked: the position of its first untimed op and the id of
        the op that one waits for."""
        return {r: (self.pointer[r], dep) for dep, blocked in self.waiters.items()
                for r in blocked}

    def finished(self) -> bool:
        """Whether every row was timed to its end."""
        return all(i == len(row) for i, row in zip(self.pointer, self.rows, strict=True))

    def cost(self) -> float:
        """The largest span (first start to last end) over the started ranks."""
        return max(e - f for e, f in zip(self.free, self.first, strict=True) if f == f)

    def makespan_value(self) -> float:
        """First start to last end over all ranks."""
        return max(self.free) - self.least_first

    def value(self, objective: str = "cost") -> float:
        """The cost or the makespan of what is timed."""
        return self.makespan_value() if objective == "makespan" else self.cost()


class Timeline:
    """An order built op by op, each op placed after its input (the greedy's and the
    lookahead's builds): the kernel times each op as it is added, so a builder reads the
    simulator's times of the order it emits, and its early stop is the kernel's.
    """

    def __init__(self, problem: Problem, objective: str = "cost", bound: float = math.inf,
                 ) -> None:
        """`bound`: `add` says False once the order cannot end below it."""
        self.kernel = Kernel(problem, [[] for _ in range(problem.num_ranks)],
                             limit=list(problem.memory_limit), bound=bound,
                             objective=objective)
        self.S, self.m = problem.num_stages, problem.num_microbatches
        self.place = self.kernel.stepper()
        """`Kernel.stepper`: time op id ``(kind * S + stage) * m + microbatch`` (kinds F, B,
        W = 0, 1, 2) on a rank; None, or why the order fails (`OVER_LIMIT`,
        `CANNOT_WIN`)."""
        self.over_limit = False
        """Whether `add` said False because the order broke the memory limit (rather
        than because it cannot win)."""

    def add(self, rank: int, kind: str, stage: int, microbatch: int) -> bool:
        """Time the op (F, B or W) after the rank's previous one and its input (placed
        before it); False once the order cannot win or is over the memory limit (where
        ``m_w > m_b`` a B adds memory, DESIGN.md 6.1). A builder's hot loop calls
        `place` with the op's id instead."""
        failed = self.place(rank, (KIND_INDEX[kind] * self.S + stage) * self.m + microbatch)
        self.over_limit = failed == OVER_LIMIT
        return failed is None

    def value(self, objective: str = "cost") -> float:
        """The finished order's cost or makespan."""
        return self.kernel.value(objective)
