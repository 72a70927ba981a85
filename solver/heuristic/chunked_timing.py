"""A fixed order on any stage-to-rank map timed as list scheduling, giving up once it
cannot win.

The V search (`solver.greedy.greedy_search`) weighs the named schedules of a placement
(ZB-V, V-Half, ...) against its own; at p=32, m=256 each simulation of 49k ops cost
0.07 s, a peak-memory pass before it 0.035 s, and most of them lose (issue 11). Timed
here, an order over the memory limit stops at its first op over it and a loser once a
rank's clock plus the work it still owes shows it cannot end below the incumbent. The
times are the simulator's (each op starts when its rank is free and its input has
arrived, section 3); the winner is still simulated and validated by `solver.solve`.
"""

from __future__ import annotations

import math

from ppsched.solver.heuristic.early_stop import MARGIN
from ppsched.solver.model.lazy_orders import LazyOrders
from ppsched.solver.model.ops import FBOp, Op, Orders
from ppsched.solver.model.problem import Problem

_EPS = 1e-9
_KIND = {"F": 0, "B": 1, "W": 2, "BW": 3}


# Why a list-scheduling build (`solver.greedy`, `solver.lookahead`) has no orders to give:
# every rank waits on another, a B adds memory over the limit where m_w > m_b, or the
# build provably cannot win against its incumbent.
DEADLOCK, OVER_THE_LIMIT, CANNOT_WIN = "deadlock", "over the limit", "cannot win"


class NotTimeable(ValueError):
    """An order `time_chunked_order` does not time (policy ops, FB ops where
    ``overlap < 1``, unequal microbatches): the caller simulates it instead."""


def time_chunked_order(problem: Problem, orders: Orders | LazyOrders,
                       objective: str = "cost", incumbent: float = math.inf,
                       ) -> tuple[float, float] | None:
    """The cost and makespan of `orders`, or None when they break the memory limit, miss
    or repeat an op, put one on the wrong rank, deadlock, or provably cannot end
    `early_stop.MARGIN` below `incumbent` by `objective`.

    Args:
        problem: any placement, alike microbatches.
        orders: per rank, its ops in execution order: F, B, W, BW and (at overlap 1)
            FB only; as `LazyOrders`, generated only as far as the timing reads (a
            loser stops early, and `LazyOrders.complete` then finishes a winner).

    Raises:
        NotTimeable: unequal microbatches, or an op of another kind (an FB where
            ``overlap < 1``).
    """
    if not problem.uniform_microbatches:
        raise NotTimeable("unequal microbatches")
    lazy = orders if isinstance(orders, LazyOrders) else LazyOrders.of(orders)
    rows = lazy.rows
    S, m, p = problem.num_stages, problem.num_microbatches, problem.num_ranks
    block, last = S * m, S - 1
    rank_of = problem.stage_to_rank
    duration = [problem.t_f, problem.t_b, problem.t_w,
                [b + w for b, w in zip(problem.t_b, problem.t_w, strict=True)]]
    m_b, m_w = problem.m_b, problem.m_w
    delta = [m_b, [w - b for w, b in zip(m_w, m_b, strict=True)], [-w for w in m_w],
             [-b for b in m_b]]
    comm_down = [problem.comm(s, s + 1) for s in range(last)] + [0.0]
    limit = [x + _EPS for x in problem.memory_limit]
    # An FB takes its parts' time at overlap 1; below, less than the work each rank owes
    # (the floor of the race), so such FBs are left to the simulator.
    plain_fb = problem.overlap == 1
    # An op's id is kind * block + stage * m + microbatch (F, B, W; a BW ends B and W).
    end_of: list[float | None] = [None] * (3 * block)
    owed = list(problem.busy_per_rank)  # the op time each rank has still to run
    pointer, free, held = [0] * p, [0.0] * p, [0.0] * p
    first = [math.nan] * p
    waiters: dict[int, list[int]] = {}
    ready = list(range(p))
    timed = 0  # ops timed, a BW counting for two: every op once when it reaches 3 S m
    bound = incumbent - MARGIN / 2  # half the margin: slack for the sums' rounding
    while ready:
        r = ready.pop()
        row, i, t = rows[r], pointer[r], free[r]
        while True:  # until the rank waits for an input, or its order ends
            while i < len(row):
                op = row[i]
                k = _KIND.get(op.kind, -1)
                if k < 0 or type(op) is not Op:
                    if type(op) is not FBOp or not plain_fb:
                        raise NotTimeable(f"{op} is not an F, B, W, BW or (overlap 1) FB op")
                    # An FB (DESIGN.md 6.4): its F part and its BW part start together
                    # once both inputs have arrived, and end together.
                    _, s, j = op
                    sb, jb = op.stage_b, op.microbatch_b
                    if rank_of[s] != r or rank_of[sb] != r:
                        return None  # an op on the wrong rank: not a candidate
                    # The BW part's input, then the F part's (none on the first stage).
                    deps = [(sb * m + jb, 0.0) if sb == last else
                            (block + sb * m + jb + m, comm_down[sb])]
                    if s > 0:
                        deps.append((s * m + j - m, comm_down[s - 1]))
                    begin = t
                    for dep, comm in deps:
                        dep_end = end_of[dep]
                        if dep_end is None:
                            waiters.setdefault(dep, []).append(r)
                            break
                        if dep_end + comm > begin:
                            begin = dep_end + comm
                    else:
                        if i == 0:
                            first[r] = begin
                        took = duration[0][s] + duration[3][sb]
                        t = begin + took
                        owed[r] -= took
                        if held[r] + m_b[s] > limit[r]:
                            return None  # the F part over the limit, before the BW frees
                        held[r] += m_b[s] - m_b[sb]
                        for x in (s * m + j, block + sb * m + jb, 2 * block + sb * m + jb):
                            if end_of[x] is not None:
                                return None  # an op twice
                            end_of[x] = t
                            timed += 1
                            woken = waiters.pop(x, None)
                            if woken:
                                ready.extend(woken)
                        i += 1
                        continue
                    break  # waiting for an input of the FB
                _, s, j = op
                if rank_of[s] != r:
                    return None  # an op on the wrong rank: not a candidate
                sj = s * m + j
                if k == 0:
                    dep, comm = (sj - m, comm_down[s - 1]) if s > 0 else (-1, 0.0)
                elif k == 2:
                    dep, comm = block + sj, 0.0
                elif s == last:
                    dep, comm = sj, 0.0
                else:
                    dep, comm = block + sj + m, comm_down[s]
                begin = t
                if dep >= 0:
                    dep_end = end_of[dep]
                    if dep_end is None:
                        waiters.setdefault(dep, []).append(r)
                        break
                    if dep_end + comm > begin:
                        begin = dep_end + comm
                if i == 0:
                    first[r] = begin
                took = duration[k][s]
                t = begin + took
                owed[r] -= took
                held[r] += delta[k][s]
                if held[r] > limit[r]:
                    return None  # over the memory limit: not a candidate
                for x in ((block + sj, 2 * block + sj) if k == 3 else (k * block + sj,)):
                    if end_of[x] is not None:
                        return None  # an op twice
                    end_of[x] = t
                    timed += 1
                    woken = waiters.pop(x, None)
                    if woken:
                        ready.extend(woken)
                i += 1
            else:
                if lazy.pull(r):  # the end of what is generated so far
                    continue
            break
        pointer[r], free[r] = i, t
        # The rank ends no earlier than its clock plus the work it still owes.
        if objective == "makespan":
            started = [x for x in first if x == x]
            floor = t + owed[r] - min(started) if started else 0.0
        else:
            floor = t + owed[r] - first[r] if i else 0.0
        if floor >= bound:
            return None
    if timed < 3 * block or any(pointer[r] < len(rows[r]) for r in range(p)):
        return None  # an op missing, or a rank waiting for one never timed (a deadlock)
    cost = max(e - f for e, f in zip(free, first, strict=True) if f == f)
    return cost, max(free) - min(x for x in first if x == x)


class RunningTiming:
    """The simulator's times of an order built op by op (each op appended after its
    input), with the floor and the memory check of `time_chunked_order`: `add` says
    when the order breaks the limit or can no longer end `early_stop.MARGIN` below
    `incumbent` by `objective`.

    A builder that decides by its own clock (the greedy waits for arrivals before it
    picks a W) may start an op later than the simulator would; these are the simulator's
    times, so its early stop and its value are those of the order it emits.
    """

    def __init__(self, problem: Problem, objective: str = "cost",
                 incumbent: float = math.inf) -> None:
        S, m, p = problem.num_stages, problem.num_microbatches, problem.num_ranks
        self._last = S - 1
        self._comm_down = [problem.comm(s, s + 1) for s in range(S - 1)]
        self._end_f = [[0.0] * m for _ in range(S)]
        self._end_b = [[0.0] * m for _ in range(S)]
        self._duration = {"F": problem.t_f, "B": problem.t_b, "W": problem.t_w}
        self._free = [0.0] * p
        self._first = [math.nan] * p
        self._least_first = math.inf
        self._owed = list(problem.busy_per_rank)
        self._held = [0.0] * p
        self.over_limit = False
        """Whether `add` said False because the order broke the memory limit (rather
        than because it cannot win)."""
        self._limit = [x + _EPS for x in problem.memory_limit]
        # What each kind adds to its rank's memory (a B frees m_b and holds m_w).
        self._delta = {"F": problem.m_b, "W": [-w for w in problem.m_w],
                       "B": [w - b for w, b in zip(problem.m_w, problem.m_b, strict=True)]}
        self._makespan = objective == "makespan"
        self._bound = incumbent - MARGIN / 2  # half the margin: slack for rounding

    def add(self, rank: int, kind: str, stage: int, microbatch: int) -> bool:
        """Time the op (F, B or W) after the rank's previous one and its input (placed
        before it); False once the order cannot win or is over the memory limit (where
        ``m_w > m_b`` a B adds memory, DESIGN.md 6.1)."""
        s, j = stage, microbatch
        held = self._held[rank] = self._held[rank] + self._delta[kind][s]
        if held > self._limit[rank]:
            self.over_limit = True
            return False
        if kind == "F":
            ready = self._end_f[s - 1][j] + self._comm_down[s - 1] if s > 0 else 0.0
        elif kind == "W":
            ready = self._end_b[s][j]
        elif s == self._last:
            ready = self._end_f[s][j]
        else:
            ready = self._end_b[s + 1][j] + self._comm_down[s]
        begin = self._free[rank]
        if ready > begin:
            begin = ready
        if self._first[rank] != self._first[rank]:
            self._first[rank] = begin
            self._least_first = min(self._least_first, begin)
        took = self._duration[kind][s]
        end = self._free[rank] = begin + took
        if kind == "F":
            self._end_f[s][j] = end
        elif kind == "B":
            self._end_b[s][j] = end
        owed = self._owed[rank] = self._owed[rank] - took
        # The rank ends no earlier than its clock plus the work it still owes.
        start = self._least_first if self._makespan else self._first[rank]
        return end + owed - start < self._bound

    def value(self, objective: str = "cost") -> float:
        """The finished order's cost or makespan."""
        if objective == "makespan":
            return max(self._free) - self._least_first
        return max(e - f for e, f in zip(self._free, self._first, strict=True) if f == f)
