"""A post-pass that overlaps forwards with backwards (FB ops, DESIGN.md 6.4) in any order.

When ``overlap < 1`` an FB takes less than its F and BW apart. The pass is solver-agnostic:
it takes per-rank orders from any method, fuses an F with the full backward next to it on
the same rank (a BW, or a B directly followed by its W) where the simulator says the
objective improves, and keeps the orders valid (each trial is simulated; memory included).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

from ppsched.solver.model.ops import FBOp, Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.sim.simulator import simulate

logger = logging.getLogger(__name__)

Orders = list[list[Op]]
# Each trial simulates the whole schedule: at most this many op timings in all, so the
# pass stays well under a second on a 400-op schedule and tries fewer pairs on big ones.
MAX_WORK = 2_000_000


def fuse_fb(problem: Problem, orders: Sequence[Sequence[Op]], objective: str = "cost",
            max_trials: int | None = None) -> Orders:
    """`orders` with adjacent forward/backward pairs fused into FB ops where that helps.

    Greedy first improvement, rank by rank and left to right, repeated until a pass
    finds nothing (or `max_trials` simulations are spent). Returns `orders` unchanged
    when ``overlap == 1`` (an FB is then never faster than its parts).
    """
    best = [list(ops) for ops in orders]
    if problem.overlap >= 1:
        return best
    if max_trials is None:
        max_trials = max(1, MAX_WORK // max(1, sum(map(len, best))))
    value = _value(problem, best, objective)
    trials = 0
    improved = True
    while improved and trials < max_trials:
        improved = False
        for r in range(len(best)):
            i = 0
            while i < len(best[r]) and trials < max_trials:
                fused = _fusion_at(best[r], i)
                if fused is not None:
                    trials += 1
                    candidate = [*best[:r], fused, *best[r + 1:]]
                    trial = _value(problem, candidate, objective)
                    if _better(trial, value):
                        best, value, improved = candidate, trial, True
                i += 1
    if trials >= max_trials:
        logger.warning("FB fusion stopped after %d trial simulations; the schedule may "
                       "have more pairs worth overlapping", trials)
    return best


def _fusion_at(ops: list[Op], i: int) -> list[Op] | None:
    """`ops` with the forward/backward group starting at `i` fused, or None if none does.

    Groups: ``F, BW``; ``BW, F``; ``F, B, W`` and ``B, W, F`` with the B and W of one
    (stage, microbatch) (they become the FB's BW part).
    """
    window = ops[i:i + 3]
    kinds = [op.kind for op in window]
    if kinds[:2] == ["F", "BW"]:
        return [*ops[:i], _fb(window[0], window[1]), *ops[i + 2:]]
    if kinds[:2] == ["BW", "F"]:
        return [*ops[:i], _fb(window[1], window[0]), *ops[i + 2:]]
    if kinds == ["F", "B", "W"] and window[1][1:] == window[2][1:]:
        return [*ops[:i], _fb(window[0], window[1]), *ops[i + 3:]]
    if kinds == ["B", "W", "F"] and window[0][1:] == window[1][1:]:
        return [*ops[:i], _fb(window[2], window[0]), *ops[i + 3:]]
    return None


def _fb(forward: Op, backward: Op) -> FBOp:
    return FBOp(forward.stage, forward.microbatch, backward.stage, backward.microbatch)


def _better(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """`a` no worse in the objective, and better in it or in the sum of the spans."""
    eps = 1e-9 * max(1.0, b[0])
    return a[0] < b[0] - eps or (a[0] <= b[0] + eps and a[1] < b[1] - eps)


def _value(problem: Problem, orders: Orders, objective: str) -> tuple[float, float]:
    """The objective, then the sum of the ranks' spans: a fusion off the critical rank
    does not move the objective at once, but frees time that later fusions use."""
    sim = simulate(problem, orders)
    if sim.metrics is None or not sim.ok:
        return math.inf, math.inf  # invalid (deadlock, memory over the limit, FB of itself)
    return sim.metrics.objective(objective), sum(sim.metrics.span)
