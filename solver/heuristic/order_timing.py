"""A fixed single-chunk order timed as list scheduling, giving up once it cannot win.

The heuristic's fallbacks (the capped 1F1B, ZB-H1, ZB-H2) are fixed orders; most lose to
the knob search. Timed by the kernel (`sim.kernel`, through `chunked_timing`), a loser
stops once a stage has idled too long to win and an order over the memory limit at its
first op over it, where the simulator would time and check all of it (issue 11). The
times are the simulator's; the winner is still simulated and validated by `solver.solve`.
"""

from __future__ import annotations

import math
from functools import partial

from ppsched.solver.heuristic.chunked_timing import time_chunked_order
from ppsched.solver.heuristic.early_stop import cannot_win, stage_floors
from ppsched.solver.model.ops import Orders
from ppsched.solver.model.problem import Problem
from ppsched.solver.sim.kernel import Kernel


def time_order(problem: Problem, orders: Orders, objective: str = "cost",
               incumbent: float = math.inf) -> tuple[float, float] | None:
    """The cost and makespan of `orders`, or None when they break the memory limit,
    deadlock, or provably cannot end `early_stop.MARGIN` below `incumbent` by `objective`.

    Args:
        problem: a single-chunk problem with alike microbatches (rank r runs stage r).
        orders: per rank, its stage's ops.
    """
    if not math.isfinite(incumbent):
        return time_chunked_order(problem, orders, objective, incumbent)
    # With an incumbent, also the floors of `early_stop.stage_floors` (the pipeline's
    # drain foreseen): a fixed order mostly loses by them within its first sweeps.
    fused = [any(op.kind == "BW" for op in ops) for ops in orders]
    return time_chunked_order(problem, orders, objective, incumbent,
                              checkpoint=partial(_can_win, problem, fused, objective,
                                                 incumbent))


def _can_win(problem: Problem, fused: list[bool], objective: str, incumbent: float,
             kernel: Kernel) -> bool:
    """Whether the kernel's partly timed single-chunk order can still win by
    `early_stop.stage_floors` (each kind in microbatch order: a stage has timed the
    first ``num_f`` Fs, read from the kernel's ends)."""
    p, m = problem.num_ranks, problem.num_microbatches
    end_of, block = kernel.end_of, p * m
    rows = [[end_of[k * block + r * m:k * block + (r + 1) * m] for r in range(p)]
            for k in range(3)]  # per kind F, B, W (a BW ends its W): per stage, its ends
    num_f, num_b, num_w = ([m - row.count(None) for row in kind] for kind in rows)
    if not all(num_f) or min(num_w) == m:
        return True  # a stage has not started (the floors need every one), or all done
    floors = stage_floors(kernel.free, num_f, num_b, num_w, rows[0], rows[1],  # type: ignore[arg-type]
                          problem.t_f, problem.t_b, problem.t_w, problem.t_comm, fused)
    return not cannot_win(floors, kernel.first, objective, incumbent)
