"""A fixed single-chunk order timed as list scheduling, giving up once it cannot win.

The heuristic's fallbacks (the capped 1F1B, ZB-H1, ZB-H2) are fixed orders; most lose to
the knob search. Timed by the kernel (`sim.kernel`, through `chunked_timing`), a loser
stops once a stage has idled too long to win and an order over the memory limit at its
first op over it, where the simulator would time and check all of it (issue 11). The
times are the simulator's; the winner is still simulated and validated by `solver.solve`.
"""

from __future__ import annotations

import math

from ppsched.solver.heuristic.chunked_timing import time_chunked_order
from ppsched.solver.model.ops import Orders
from ppsched.solver.model.problem import Problem


def time_order(problem: Problem, orders: Orders, objective: str = "cost",
               incumbent: float = math.inf) -> tuple[float, float] | None:
    """The cost and makespan of `orders`, or None when they break the memory limit,
    deadlock, or provably cannot end `early_stop.MARGIN` below `incumbent` by `objective`.

    Args:
        problem: a single-chunk problem with alike microbatches (rank r runs stage r).
        orders: per rank, its stage's ops.
    """
    return time_chunked_order(problem, orders, objective, incumbent)
