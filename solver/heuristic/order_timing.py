"""A fixed single-chunk order timed as list scheduling, giving up once it cannot win.

The heuristic's fallbacks (the capped 1F1B, ZB-H1, ZB-H2) are fixed orders; most lose to
the knob search. Timed here, a loser stops at the first checkpoint that proves it
(`solver.early_stop`) and an order over the memory limit at its first op over it, where
the simulator would time and check all of it (issue 11). The times are the simulator's
(each op starts when its rank is free and its input has arrived, section 3); the winner
is still simulated and validated by `solver.solve`.
"""

from __future__ import annotations

import math

from ppsched.solver.heuristic.early_stop import cannot_win, idle_cap, stage_floors
from ppsched.solver.model.ops import Orders
from ppsched.solver.model.problem import Problem

_EPS = 1e-9
_KIND = {"F": 0, "B": 1, "W": 2, "BW": 3}


def time_order(problem: Problem, orders: Orders, objective: str = "cost",
               incumbent: float = math.inf) -> tuple[float, float] | None:
    """The cost and makespan of `orders`, or None when they break the memory limit,
    deadlock, or provably cannot end `early_stop.MARGIN` below `incumbent` by `objective`.

    Args:
        problem: a single-chunk problem with alike microbatches (rank r runs stage r).
        orders: per rank, its stage's ops, each kind in microbatch order.
    """
    p, m = problem.num_ranks, problem.num_microbatches
    t_f, t_b, t_w, t_comm = problem.t_f, problem.t_b, problem.t_w, problem.t_comm
    duration = [t_f, t_b, t_w, [b + w for b, w in zip(t_b, t_w, strict=True)]]
    m_b, m_w, limit = problem.m_b, problem.m_w, problem.memory_limit
    delta = [m_b, [w - b for w, b in zip(m_w, m_b, strict=True)], [-w for w in m_w],
             [-b for b in m_b]]
    rows = [[_KIND[op.kind] for op in ops] for ops in orders]
    fused = [any(k == 3 for k in row) for row in rows]
    pointer, free, first, held = [0] * p, [0.0] * p, [0.0] * p, [0.0] * p
    num_f, num_b, num_w = [0] * p, [0] * p, [0] * p
    f_end = [[0.0] * m for _ in range(p)]
    b_end = [[0.0] * m for _ in range(p)]
    left, sweep = sum(map(len, rows)), 0
    # Each rank's op time plus its idle time so far: once one passes `cap` the order
    # cannot win (`early_stop.idle_cap`), whatever the rest of it does.
    spent = [m * (t_f[r] + t_b[r] + t_w[r]) for r in range(p)]
    cap = idle_cap(incumbent)
    sweep_order = list(range(p)) + list(range(p - 1, -1, -1))  # Fs flow down, Bs up
    while left:
        placed = left
        for r in sweep_order:
            row, i, t = rows[r], pointer[r], free[r]
            while i < len(row):
                kind = row[i]
                if kind == 0:
                    x = num_f[r]
                    if r > 0 and num_f[r - 1] <= x:
                        break  # its input is not timed yet
                    ready = f_end[r - 1][x] + t_comm[r - 1] if r > 0 else 0.0
                elif kind == 2:
                    x = num_w[r]
                    ready = b_end[r][x]  # its B ran earlier on this rank
                else:
                    x = num_b[r]
                    if r == p - 1:
                        ready = f_end[r][x]
                    elif num_b[r + 1] <= x:
                        break
                    else:
                        ready = b_end[r + 1][x] + t_comm[r]
                start = t if t > ready else ready
                if kind == 0 and x == 0:
                    first[r] = start
                elif start > t:
                    spent[r] += start - t  # the rank idles
                    if spent[r] > cap:
                        return None
                t = start + duration[kind][r]
                held[r] += delta[kind][r]
                if held[r] > limit[r] + _EPS:
                    return None  # over the memory limit: not a candidate
                if kind == 0:
                    f_end[r][x] = t
                    num_f[r] = x + 1
                elif kind == 2:
                    num_w[r] = x + 1
                else:
                    b_end[r][x] = t
                    num_b[r] = x + 1
                    if kind == 3:
                        num_w[r] = x + 1
                i += 1
            left -= i - pointer[r]
            pointer[r], free[r] = i, t
        if left == placed:
            return None  # no rank could move: the order deadlocks
        sweep += 1
        # Checkpoints at sweeps 1, 2, 4, ..., once every rank has started.
        if math.isfinite(incumbent) and left and sweep & (sweep - 1) == 0 and all(num_f):
            floors = stage_floors(free, num_f, num_b, num_w, f_end, b_end, t_f, t_b, t_w,
                                  t_comm, fused)
            if cannot_win(floors, first, objective, incumbent):
                return None
    return max(e - s for e, s in zip(free, first, strict=True)), max(free) - min(first)
