"""What every raced list-scheduling build (`ppsched.solver.heuristic.greedy`,
`ppsched.solver.heuristic.lookahead`) must do."""

from __future__ import annotations

import math
from collections.abc import Callable

from ppsched.solver.heuristic.chunked_timing import CANNOT_WIN, DEADLOCK, OVER_THE_LIMIT
from ppsched.solver.model.ops import Orders
from ppsched.solver.model.problem import Problem
from ppsched.solver.sim.simulator import validate

Build = Callable[[float], tuple[Orders, float] | str]
"""A build of fixed problem, knobs and objective, raced against the incumbent given."""


def check_times_itself_as_the_simulator(problem: Problem, objective: str,
                                        build: Build) -> None:
    """Unraced, the build's value is the simulator's for its orders (valid: every op
    once, each after its input, within the memory limit); raced against that value it
    cannot win, and against a hair more it builds the same orders."""
    built = build(math.inf)
    if isinstance(built, str):
        assert built in (DEADLOCK, OVER_THE_LIMIT)  # with no incumbent, nothing to lose to
        return
    orders, value = built
    assert value == validate(problem, orders).metrics.objective(objective)
    assert build(value) == CANNOT_WIN
    assert build(value + 1e-6) == built
