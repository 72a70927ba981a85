"""The exact refinement where several stages share a rank (V and loop layouts) and memory
binds: the order-literal model's deadline probes and phases (`solver.cpsat` with
`solver.cpsat_shared`), then the window search (`solver.lns`) from their best.

On gpt1.5b-p8-m24 cut in V at limit 6 the heuristic's 1347.75 stood against a bound of
1101.6 (the work per rank): the plain model's reservoirs prove nothing there, and the
V memory relaxation (`solver.v_relaxation`) keeps one rank whole, which cannot see the
congestion of the whole pipeline. The probes on the whole model raise the bound over its
FIFO orders; the phases and the windows improve the schedule.
"""

from __future__ import annotations

import math
import time

from ppsched.solver.exact import cpsat_shared
from ppsched.solver.exact.cpsat import solve_cpsat_phased
from ppsched.solver.exact.frame import ExactResult, Orders, Progress, ProgressFn, finish, scale
from ppsched.solver.exact.lns import WINDOW_SECONDS, solve_lns
from ppsched.solver.model.problem import Problem

# The share of the budget the whole model (probes and phases) takes; the window search
# gets the rest. The probes settle their bound early and the phases find most of what
# the whole model finds in their first half (gpt1.5b-p8-m24 V at limits 4 and 6).
MODEL_SHARE = 0.6
# The wall-time limit under a deterministic budget: never reached.
UNLIMITED_S = 1e9


def applies(problem: Problem) -> bool:
    """Where this search runs: several chunks per rank, alike microbatches (the window
    search reads one duration per stage), and the shared-memory literals apply."""
    return problem.num_chunks > 1 and problem.uniform_microbatches \
        and cpsat_shared.applies(problem)


def solve_multichunk(problem: Problem, hint: Orders, *, objective: str = "cost",
                     time_limit_s: float = 10.0, workers: int = 2, fifo: bool = True,
                     on_progress: ProgressFn | None = None, seed: int | None = None,
                     deterministic_s: float | None = None) -> ExactResult:
    """Refine `hint` on a V or loop problem (`applies`); never worse than the hint.

    The whole model takes `MODEL_SHARE` of the budget (wall time, or CP-SAT's
    deterministic time when `deterministic_s` is given: with one worker and a seed the
    answer then repeats on any load); the window search takes the rest, in windows of
    `lns.WINDOW_SECONDS` deterministic seconds each when the budget is deterministic.
    The bound, and its scope, are the whole model's (no window proves anything).
    """
    began = time.perf_counter()
    model_det = None if deterministic_s is None else MODEL_SHARE * deterministic_s
    if deterministic_s is not None:
        # The deterministic budget alone decides: no wall-time check may cut a phase or
        # a probe short, or the answer would depend on the machine's load.
        time_limit_s = UNLIMITED_S
    whole = solve_cpsat_phased(problem, hint, objective=objective,
                               time_limit_s=MODEL_SHARE * time_limit_s, workers=workers,
                               fifo=fifo, on_progress=on_progress, seed=seed,
                               deterministic_s=model_det)
    if whole.status in ("optimal", "infeasible") or whole.orders is None:
        return whole
    offset = time.perf_counter() - began
    progress: list[Progress] = list(whole.progress)

    def shifted(point: Progress) -> None:
        point = (point[0] + offset, point[1], max(point[2], whole.bound))
        progress.append(point)
        if on_progress is not None:
            on_progress(point)

    if deterministic_s is not None:
        windows = math.floor((deterministic_s - (model_det or 0.0)) / WINDOW_SECONDS)
        windowed = solve_lns(problem, whole.orders, objective=objective, workers=workers,
                             seed=seed or 0, on_progress=shifted, max_windows=windows) \
            if windows > 0 else whole
    else:
        left = time_limit_s - offset
        windowed = solve_lns(problem, whole.orders, objective=objective,
                             time_limit_s=left, workers=workers, seed=seed or 0,
                             on_progress=shifted) if left > 1.0 else whole
    best = windowed.orders if windowed.objective is not None and whole.objective is not None \
        and windowed.objective < whole.objective else whole.orders
    return finish(problem, "cpsat", objective, hint, best, whole.bound,
                  proven=False, began=began, progress=progress,
                  tolerance=scale(problem).time_tolerance, scope=whole.scope)
