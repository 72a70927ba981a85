"""Budgets of the exact search: wall seconds, CP-SAT work, or both, and how CP-SAT is
told each.

A wall-clock limit stops CP-SAT wherever the machine got by then, so under load the same
input can return another schedule (issue 27: gpt1.5b-p8-m24 at limit 6 proved 1527.3
when idle, kept the heuristic's 1895.4 when loaded). A work limit counts CP-SAT's
deterministic time instead: a weighted count of the operations its search performed,
scaled to be about a second on a typical core, so where the search stops depends on the
input alone.

Deterministic time alone is not enough with several workers: OR-Tools' parameter file
(sat_parameters.proto) says the parallel search is deterministic only with
``interleave_search``, which runs the workers' strategies in batches of tasks and shares
what they learnt only between batches; without it, which worker finds what first depends
on thread timing. So under a work limit every solve with several workers interleaves; and
no wall limit is set unless the caller gave one (a wall limit that fires first would make
the stopping point the machine's again).
"""

from __future__ import annotations

import math
from typing import Any

# The least work a solve is given: CP-SAT stops at once under a zero deterministic limit,
# and a phase with less left is skipped by its caller.
MIN_WORK = 0.01
# The least wall time a solve is given when a wall limit is set (the same reason).
MIN_WALL_S = 0.01


def set_limits(parameters: Any, *, wall_s: float | None, work: float | None,
               workers: int) -> None:
    """Set a CP-SAT solver's limits and workers (`parameters`: its `SatParameters`).

    Args:
        wall_s: wall seconds; None or infinite: no wall limit.
        work: CP-SAT deterministic time; None or infinite: no work limit. Finite, with
            several workers, it also turns on ``interleave_search`` (see the module).
        workers: search workers (threads).
    """
    parameters.num_workers = workers
    if wall_s is not None and math.isfinite(wall_s):
        parameters.max_time_in_seconds = max(MIN_WALL_S, wall_s)
    if work is not None and math.isfinite(work):
        parameters.max_deterministic_time = max(MIN_WORK, work)
        if workers > 1:
            parameters.interleave_search = True


# The wall limit of an exact search given neither a wall nor a work limit.
DEFAULT_WALL_S = 10.0


def wall_limit(time_limit_s: float | None, work: float | None) -> float:
    """The wall limit in force: `time_limit_s` when given; else none (math.inf) under a
    work limit, so that the wall clock decides nothing; else `DEFAULT_WALL_S`."""
    if time_limit_s is not None:
        return time_limit_s
    return math.inf if work is not None else DEFAULT_WALL_S
