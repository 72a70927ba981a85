"""A V-placement build in rounds: each rank runs one B and then one F per round, and
holds its Ws back for the waits (the rule of the Zero Bubble authors' ZB-V scheduler).

Why a candidate of its own (issue 27): the greedy (`heuristic.greedy`) takes any F whose
input has arrived while memory allows, so with 2p of memory its warm-up fills the memory
and the pipeline drains late; the named ZB-V order (`generators.v_shape`) runs every W
right after its B, and its cool-down runs the rank's chunk-1 Ws in one block. Both lose
to the authors' scheduler by 0.04-3.2% on the paper profiles at 1p and 2p. What that
scheduler does, written here as phases:

1. warm-up: the first microbatch goes down the V; then, from the bottom rank up, each
   rank runs more chunk-0 forwards only while they end before the first chunk-1 forward
   can reach it and while it keeps room for the forwards it still runs before its first
   B (memory is not filled because it is there); the lower ranks then catch up, chunk-0
   and chunk-1 forwards in turn, until each has run as many forwards as the rank above;
2. rounds (1F1B's pairing on two chunks): each rank runs one B per round (its chunk-0 B
   once that gradient is placed, else its chunk-1 B), then one F (chunk 1 once its input
   is placed, else chunk 0); the ranks take their turns in the order the data flows, so
   each op's input is placed before it;
3. Ws are deferred: a W runs before a B or an F only when memory needs it, when it ends
   before that op's input can arrive, or when the wait would leave the rank idle longer
   than the most idle rank so far (the bubbles are shared out; `RoundsKnobs` says before
   which ops this last rule holds); the rest fill the drain.

Every op is timed by the kernel's `Timeline` as it is placed (the simulator's times, its
memory check and its race against an incumbent), and the build decides from those times.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ppsched.solver.heuristic.chunked_timing import (
    DEADLOCK,
    RunningTiming,
)
from ppsched.solver.model.ops import Op, Orders
from ppsched.solver.model.problem import Problem

_new = tuple.__new__
_F, _B, _W = 0, 1, 2
_KINDS = ("F", "B", "W")
Built = tuple[Orders, float] | str


@dataclass(frozen=True)
class RoundsKnobs:
    """One build of the rounds: before which ops the third W rule of the module holds
    (a W before an op whose wait would leave the rank idle longer than the most idle
    rank). Before a chunk-0 B it always holds.

    Attributes:
        fill_before_f: before an F.
        fill_before_up_b: before a chunk-1 B (the gradient on its way down the V's
            second half).
    """

    fill_before_f: bool = True
    fill_before_up_b: bool = True

    @property
    def name(self) -> str:
        return "v-rounds" + ("" if self.fill_before_f else "-bf") \
            + ("" if self.fill_before_up_b else "-nb")


# The builds the V search runs (`rounds_builds`: a later one only where it parts from
# the first). On the paper profiles the first is the best of them at 2p, and at
# 1p up to p=16; the second at 1p for p=32 (by 0.05%), the third at 1.5p for p=8 (by
# 0.3-0.7%). The fourth setting (neither) is never better than all three there.
CANDIDATES = (RoundsKnobs(True, True), RoundsKnobs(False, True), RoundsKnobs(True, False))


def rounds_timed(problem: Problem, knobs: RoundsKnobs, objective: str = "cost",
                 incumbent: float = math.inf) -> Built:
    """The build's orders and their `objective` as the simulator times them, or why
    there are none: `DEADLOCK` (an op's input is not placed when its turn comes),
    `OVER_THE_LIMIT` (no W left to free the memory an op needs) or `CANNOT_WIN` once
    they provably cannot end `early_stop.MARGIN` below `incumbent`.

    Raises:
        ValueError: a problem not in V placement.
    """
    _check(problem)
    return _Build(problem, knobs, objective, incumbent).run()


def rounds_builds(problem: Problem, objective: str, race: Callable[[int], float],
                  ) -> Iterator[tuple[RoundsKnobs, Built]]:
    """`CANDIDATES` built in turn, each raced against ``race(i)`` (asked when its turn
    comes, so that it sees what the caller kept of the one before).

    Each is built whole: resuming a later build from the round where it parts from the
    first, or skipping it where no decision seemed to differ, gave other orders than
    the build made alone (property tests found both).

    Raises:
        ValueError: a problem not in V placement.
    """
    _check(problem)
    for i, knobs in enumerate(CANDIDATES):
        yield knobs, _Build(problem, knobs, objective, race(i)).run()


def _check(problem: Problem) -> None:
    if problem.num_chunks != 2 or problem.placement != "v":
        raise ValueError("the rounds build V placements (2 chunks per rank)")


class _Failed(Exception):
    """The build ends without orders: why (`DEADLOCK`, `OVER_THE_LIMIT`, `CANNOT_WIN`)."""


class _Build:
    """The orders so far, the kernel that times them, and per rank its deferred Ws."""

    def __init__(self, problem: Problem, knobs: RoundsKnobs, objective: str,
                 incumbent: float) -> None:
        p, m = problem.num_ranks, problem.num_microbatches
        self.problem, self.p, self.m, self.S = problem, p, m, problem.num_stages
        self.knobs, self.objective = knobs, objective
        self.timing = RunningTiming(problem, objective, incumbent)
        self.kernel = self.timing.kernel
        self.counts = [[0] * self.S for _ in range(3)]  # placed ops by kind and stage
        self.orders: Orders = [[] for _ in range(p)]
        self.deferred: list[deque[int]] = [deque() for _ in range(p)]  # W stages, by B
        self.most_idle = [0.0]  # the largest idle time of any rank so far
        self.place, self.take = self._steps()

    def run(self) -> Built:
        """The whole build."""
        try:
            self.warm_up()
            for _ in range(2 * self.m):
                self.round()
            self.drain()
        except _Failed as failed:
            return str(failed)
        if any(c != self.m for counts in self.counts for c in counts):
            return DEADLOCK
        return self.orders, self.timing.value(self.objective)

    # Placing (closures over the lists: these run once per op, 49k a build at p=32,
    # m=256; a method call per op was a third of a build).

    def _steps(self) -> tuple[Callable[[int, int, int], None],
                              Callable[[int, int, int], None]]:
        """`place` (the next op of a kind and stage on a rank) and `take` (the same
        after the deferred Ws rule 3 of the module puts before it)."""
        p, m, S = self.p, self.m, self.S
        kernel = self.kernel
        end_of, free, idle, held = kernel.end_of, kernel.free, kernel.idle, kernel.held
        limit = kernel.limit if kernel.limit is not None else [math.inf] * p
        dep, lat, dur, delta = kernel.t.dep, kernel.t.lat, kernel.t.dur, kernel.t.delta
        step, counts, orders = self.timing.place, self.counts, self.orders
        count_w = counts[_W]
        w_base = _W * S * m
        deferred, most_idle = self.deferred, self.most_idle
        # Whether an op's input is made on another rank, by kind (F, B) and stage. In the
        # V only three are not: the last rank's turn (its chunk-1 F after its chunk-0 F,
        # its chunk-0 B after its chunk-1 B) and the first rank's loss (its chunk-1 B
        # after its own F). There no wait is left for a W to fill.
        crosses = ([s not in (0, p) for s in range(S)],
                   [s not in (p - 1, S - 1) for s in range(S)])
        rank_of = self.problem.stage_to_rank
        fills = _fills(self.knobs, rank_of)

        def place(r: int, k: int, s: int) -> None:
            count = counts[k]
            j = count[s]
            x = (k * S + s) * m + j
            try:
                failed = step(r, x)
            except TypeError:  # its input's end is None: not placed
                raise _Failed(DEADLOCK) from None
            if failed is not None:
                raise _Failed(failed)  # OVER_THE_LIMIT or CANNOT_WIN
            count[s] = j + 1
            orders[r].append(_new(Op, (_KINDS[k], s, j)))
            if idle[r] > most_idle[0]:
                most_idle[0] = idle[r]
            if k == _B:
                deferred[r].append(s)

        def place_w(r: int, waiting: deque[int]) -> None:
            """The rank's oldest deferred W (`place`, for a W: its B is on the rank)."""
            s = waiting.popleft()
            j = count_w[s]
            x = w_base + s * m + j
            failed = step(r, x)
            if failed is not None:
                raise _Failed(failed)
            count_w[s] = j + 1
            orders[r].append(_new(Op, ("W", s, j)))
            # (A W never waits: its B ran on this rank. The most idle rank stays.)

        def take(r: int, k: int, s: int) -> None:
            count = counts[k]
            j = count[s]
            x = (k * S + s) * m + j
            waiting = deferred[r]
            if waiting:
                while held[r] + delta[x] > limit[r]:  # for its memory
                    place_w(r, waiting)
                    if not waiting:
                        break
                if waiting and crosses[k][s]:
                    end = end_of[dep[x]]
                    if end is None:
                        raise _Failed(DEADLOCK)
                    at = end + lat[x]
                    # Those that end before its input arrives.
                    while at >= free[r] + dur[w_base + waiting[0] * m + count_w[waiting[0]]]:
                        place_w(r, waiting)
                        if not waiting:
                            break
                    # One more where the rank would idle longer than the most idle rank.
                    if waiting and at - free[r] > most_idle[0] - idle[r]:
                        if fills[k][s]:
                            place_w(r, waiting)
            # `place`, inlined (a third of the calls of a build). Over the limit with no
            # W left, the kernel says so.
            try:
                failed = step(r, x)
            except TypeError:
                raise _Failed(DEADLOCK) from None
            if failed is not None:
                raise _Failed(failed)
            count[s] = j + 1
            orders[r].append(_new(Op, (_KINDS[k], s, j)))
            if idle[r] > most_idle[0]:
                most_idle[0] = idle[r]
            if k == _B:
                waiting.append(s)

        return place, take

    # Phases.

    def warm_up(self) -> None:
        """Phase 1 of the module."""
        p, m, place = self.p, self.m, self.place
        count = self.counts[_F]
        kernel = self.kernel
        end_of, free, held = kernel.end_of, kernel.free, kernel.held
        dur, delta, lat = kernel.t.dur, kernel.t.delta, kernel.t.lat
        limit = kernel.limit if kernel.limit is not None else [math.inf] * p
        for r in range(p):  # the first microbatch down the V
            place(r, _F, r)
        for r in range(p - 1, -1, -1):
            up = 2 * p - 1 - r
            if r < p - 1:
                # More chunk-0 forwards while each ends before the first chunk-1 forward
                # can arrive, keeping room for it, that chunk-1 forward and the r pairs
                # of forwards the rank runs before its first B. (An F's memory delta is
                # its activation.)
                end = end_of[(up - 1) * m]  # F(up - 1, 0), on the rank below
                assert end is not None  # (this loop goes up the ranks)
                arrives = end + lat[up * m]
                room = (r + 1) * (delta[r * m] + delta[up * m])
                while count[r] < m and held[r] + room <= limit[r] \
                        and free[r] + dur[r * m + count[r]] <= arrives:
                    for q in range(r + 1):
                        if count[q] < m:
                            place(q, _F, q)
            place(r, _F, up)
        # The lower ranks catch up: chunk-0 and chunk-1 forwards in turn on every rank
        # from the bottom of the V up to r, until r has run as many as the rank above it
        # and one chunk-1 forward more. (Each turn places one on r while it has any
        # left, so the loop ends.)
        chunk = 0
        for r in range(1, p):
            up, above_up = 2 * p - 1 - r, 2 * p - r
            while count[r] + count[up] < count[r - 1] + count[above_up] \
                    or count[up] <= count[above_up] < m:
                for q in range(p - 1, r - 1, -1):
                    s = q if chunk == 0 else 2 * p - 1 - q
                    if count[s] < m:
                        place(q, _F, s)
                chunk = 1 - chunk

    def round(self) -> None:
        """Phase 2 of the module: one B, then one F, on every rank."""
        p, m, S = self.p, self.m, self.S
        take, end_of = self.take, self.kernel.end_of
        num_b, num_f = self.counts[_B], self.counts[_F]
        # The Bs: chunk 0 where its gradient is placed, from the bottom rank up (as the
        # gradient flows); then chunk 1, from the top rank down.
        down_b: list[int] = []
        up_b: list[int] = []
        for r in range(p):
            up = 2 * p - 1 - r
            if num_b[r] >= num_b[up]:  # each chunk-1 B owed before this chunk-0 B
                if num_b[up] < m:
                    up_b.append(r)
            elif r == p - 1 or num_b[up] == m \
                    or end_of[(_B * S + r + 1) * m + num_b[r]] is not None:
                down_b.append(r)
            else:
                up_b.append(r)
        for r in reversed(down_b):
            take(r, _B, r)
        for r in up_b:
            take(r, _B, 2 * p - 1 - r)
        # The Fs, from the top rank down: chunk 1 where its input is placed, else chunk 0
        # where its input is placed (on the first rank it has none).
        for r in range(p):
            up = 2 * p - 1 - r
            if num_f[up] == m:
                continue
            if num_f[up] >= num_f[r]:
                s = r
            elif r == p - 1 or end_of[(up - 1) * m + num_f[up]] is not None:
                s = up
            elif num_f[r] < m and (r == 0 or end_of[(r - 1) * m + num_f[r]] is not None):
                s = r
            else:
                continue
            take(r, _F, s)

    def drain(self) -> None:
        """The deferred Ws left, oldest first."""
        for r, waiting in enumerate(self.deferred):
            while waiting:
                self.place(r, _W, waiting.popleft())


def _fills(knobs: RoundsKnobs, rank_of: tuple[int, ...]) -> tuple[list[bool], list[bool]]:
    """Whether rule 3's last part holds before the F and the B of each stage."""
    before_f = [knobs.fill_before_f] * len(rank_of)
    before_b = [s == rank_of[s] or knobs.fill_before_up_b for s in range(len(rank_of))]
    return before_f, before_b
