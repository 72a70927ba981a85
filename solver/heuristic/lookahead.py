"""A named schedule's order as a priority list, list-scheduled with a lookahead window.

Below ZB-V's memory the V search's named candidates are V-Half and V-Min, which hold a
half and a third of it whatever the limit leaves free, and the greedy's rules (B first,
F while memory allows) place the V's forwards in an order that idles the ranks (issue
11: on `gpt1.5b-p8-m24` at limit 6 V-Half costs 1379.1 and the best greedy build more).
Here each rank follows a named order but may run, out of turn, one of the next `window`
ops of it: whenever the rank is free it takes the first of them whose input has arrived
and that fits the memory limit, else it waits for the earliest of their inputs. The
order keeps the named schedule's shape and uses the memory the limit leaves (1347.7
there). Like the greedy's, the orders are timed as the simulator times them
(`chunked_timing.RunningTiming`), and a build gives up once it cannot win.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass

from ppsched.solver.generators import REGISTRY
from ppsched.solver.heuristic.chunked_timing import (
    DEADLOCK,
    RunningTiming,
)
from ppsched.solver.model.ops import Op, Orders
from ppsched.solver.model.problem import Problem

_EPS = 1e-9
_new = tuple.__new__
_KIND = {"F": 0, "B": 1, "W": 2}


@dataclass(frozen=True)
class Lookahead:
    """One lookahead candidate.

    Attributes:
        base: the named schedule whose order is the priority list.
        window: how many of a rank's next ops it may choose among.
        reserve: whether an F leaves room for one activation of each of the rank's later
            stages (the greedy's rule against an early stage starving the later ones).
    """

    base: str
    window: int
    reserve: bool

    @property
    def name(self) -> str:
        return f"{self.base}{MARK}{self.window}" + ("r" if self.reserve else "")


MARK = "+lookahead"
"""What the name of a lookahead candidate (and a method built on one) holds."""


# The candidates the V search tries where ZB-V does not fit: on the public profiles cut
# in V at 0.25p-0.875p, these 4 of 30 (V-Half, V-Min, ZB-V as the base; windows 2-32;
# reserve or not) find 92% of the improvement all 30 find.
CANDIDATES = (Lookahead("v-half", 2, False), Lookahead("v-min", 8, False),
              Lookahead("v-half", 16, True), Lookahead("v-min", 16, False))

# Those tried on an order above `scale.FULL_SEARCH_OPS`: the one that won on each large
# case measured (gpt28.3b stage times at p=64, m=512 and p=128, m=1024, 0.5p; issue 27),
# where the four cost 5.4 s and 13 s.
LARGE_CANDIDATES = (Lookahead("v-half", 16, True),)


def lookahead_timed(problem: Problem, candidate: Lookahead, objective: str = "cost",
                    incumbent: float = math.inf) -> tuple[Orders, float] | str:
    """The candidate's orders and their `objective` as the simulator times them, or why
    there are none: `DEADLOCK` (every rank waits on an op another rank cannot place),
    `OVER_THE_LIMIT`, or `CANNOT_WIN` once they provably cannot end `early_stop.MARGIN`
    below `incumbent`.

    Raises:
        ValueError: the base schedule refuses the problem, or its order holds an op other
            than F, B and W.
    """
    # Each row reversed, its next op last: a rank takes ops from the head of its order,
    # and `list.pop` at the head moves the whole row (4.4 us an op at p=128, m=1024,
    # 6,144 ops a rank; issue 27), at the tail nothing.
    priority = [list(reversed(row)) for row in REGISTRY[candidate.base](problem)]
    if any(op.kind not in ("F", "B", "W") or type(op) is not Op
           for row in priority for op in row):
        raise ValueError(f"{candidate.base}: only F, B and W orders can be a priority list")
    return _schedule(problem, priority, candidate.window, candidate.reserve, objective,
                     incumbent)


def later_stages_room(problem: Problem) -> list[float]:
    """Per stage, the room an F of it leaves free on its rank: one activation of each
    later stage of the rank (without it an early stage could fill the memory and starve
    the later ones: a deadlock)."""
    room = [0.0] * problem.num_stages
    for stages in problem.rank_to_stages:
        ordered = sorted(stages)
        for i, s in enumerate(ordered):
            room[s] = sum(problem.m_b[t] for t in ordered[i + 1:])
    return room


def _schedule(problem: Problem, priority: list[list[Op]], window: int, reserve_on: bool,
              objective: str, incumbent: float) -> tuple[Orders, float] | str:
    p, m, num_stages = problem.num_ranks, problem.num_microbatches, problem.num_stages
    duration = {"F": problem.t_f, "B": problem.t_b, "W": problem.t_w}
    m_b, m_w = problem.m_b, problem.m_w
    state = _State(problem)
    pick = _pick(problem, state, window, reserve_on)
    orders: Orders = [[] for _ in range(p)]
    ready = [(0.0, r) for r in range(p) if priority[r]]
    stalled: list[int] = []  # ranks with no input known to arrive: wait for a placement
    timing = RunningTiming(problem, objective, incumbent)
    while ready:
        now, r = heapq.heappop(ready)
        row = priority[r]
        chosen, next_at = pick(r, row, now)
        if chosen < 0:
            if next_at < math.inf:
                heapq.heappush(ready, (next_at, r))
            else:
                stalled.append(r)
            continue
        kind, s, j = row.pop(-1 - chosen)
        end = now + duration[kind][s]
        if kind == "F":
            state.end_f[s][j] = end
            state.memory[r] += m_b[s]
        elif kind == "B":
            state.end_b[s][j] = end
            state.memory[r] += m_w[s] - m_b[s]
        else:
            state.memory[r] -= m_w[s]
        orders[r].append(_new(Op, (kind, s, j)))
        failed = timing.place(r, (_KIND[kind] * num_stages + s) * m + j)  # the kernel
        if failed is not None:
            return failed  # OVER_THE_LIMIT or CANNOT_WIN
        if row:
            heapq.heappush(ready, (end, r))
        # A placed op may be the input a stalled rank waits for; it looks again then.
        for q in stalled:
            heapq.heappush(ready, (end, q))
        stalled.clear()
    if any(priority):
        return DEADLOCK
    return orders, timing.value(objective)


class _State:
    """Per stage, its placed ops' ends by the build's clock (nan: not placed); per rank,
    its memory."""

    def __init__(self, problem: Problem) -> None:
        m, num_stages = problem.num_microbatches, problem.num_stages
        self.end_f = [[math.nan] * m for _ in range(num_stages)]
        self.end_b = [[math.nan] * m for _ in range(num_stages)]
        self.memory = [0.0] * problem.num_ranks


def _pick(problem: Problem, state: _State, window: int, reserve_on: bool,
          ) -> Callable[[int, list[Op], float], tuple[int, float]]:
    """The rule: the first of a rank's next `window` ops whose input has arrived by
    `now` and that fits the memory limit (its position, or -1), and the earliest arrival
    of those that fit (inf: none known). A row holds the rank's ops left in reverse, its
    next op last: position i is ``row[-1 - i]``."""
    last = problem.num_stages - 1
    m_b, m_w, limit = problem.m_b, problem.m_w, problem.memory_limit
    comm_down = [problem.comm(s, s + 1) for s in range(last)]
    reserve = later_stages_room(problem) if reserve_on else [0.0] * problem.num_stages
    end_f, end_b, memory = state.end_f, state.end_b, state.memory

    # `pick` runs once per op and look (9 candidates a look at window 16): the input's
    # arrival and the memory rule are inlined, as calls they were half its time (issue
    # 27). The arrival: an F's is the previous stage's F (0.0 on stage 0), a W's its own
    # B, a B's the next stage's B (the last stage's own F); nan while not placed.
    def pick(r: int, row: list[Op], now: float) -> tuple[int, float]:
        next_at = math.inf
        held, cap = memory[r], limit[r]
        for i in range(min(window, len(row))):
            kind, s, j = row[-1 - i]
            if kind == "F":
                at = end_f[s - 1][j] + comm_down[s - 1] if s else 0.0
                if at != at or not held + m_b[s] <= cap - reserve[s] + _EPS:
                    continue  # not placeable yet: its input is not placed, or no room
            elif kind == "W":
                at = end_b[s][j]
                if at != at:
                    continue
            else:
                at = end_f[s][j] if s == last else end_b[s + 1][j] + comm_down[s]
                if at != at or not held + m_w[s] - m_b[s] <= cap + _EPS:
                    continue
            if at <= now + _EPS:
                return i, next_at
            if at < next_at:
                next_at = at
        return -1, next_at

    return pick
