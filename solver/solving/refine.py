"""Exact refinement for the ``ilp`` method: its options (`ExactOptions`), the memory
relaxation's bound first, then the chosen backend (CP-SAT, the window search, the MILP or
the model with policies) from the heuristic's schedule.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace
from typing import NamedTuple

from ppsched.solver.exact.frame import (
    SCOPE_ALL,
    ExactResult,
    ProgressFn,
    proven_by_bound,
    split_fused,
)
from ppsched.solver.exact.memory_relaxation import relaxation_runs
from ppsched.solver.exact.v_relaxation import applies as applies_to_v
from ppsched.solver.exact.v_relaxation import v_relaxation_runs
from ppsched.solver.exact.work_limit import wall_limit
from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.ops import Orders
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import Profile
from ppsched.solver.policies.fit import offers_policies
from ppsched.solver.sim.simulator import simulate

logger = logging.getLogger(__name__)

BACKENDS = ("cpsat", "milp")
# Above this many ops the whole CP-SAT model gains nothing in a minute (issue 11: p=32,
# m=256 at 0.75p), so `ilp` runs the window search of `solver.lns` instead.
LNS_MIN_OPS = 12_000
# The share of `--time-limit` the memory relaxation may take before the exact model runs
# (rank 0 alone proves gpt1.5b-p8-m24 at limit 6 in 1-2 s of its 6 s at --time-limit 30;
# the window of ranks 0-1 needs more: `benchmarks.memory_bounds`).
RELAXATION_SHARE = 0.2
# Beyond this many microbatches the relaxation proves nothing useful in that share
# (measured with 2 workers: gpt28.3b-p32-m96 at limit 24, nothing in 12 s; m256, below
# the closed forms after 80 s; gpt14.6b-p16-m48 at limit 12 beats them in 10
# deterministic seconds), so `ilp` leaves it out there.
RELAXATION_MAX_MICROBATCHES = 64


@dataclass(frozen=True, kw_only=True)
class ExactOptions:
    """How the ``ilp`` method searches."""

    backend: str = "cpsat"
    """``cpsat`` (OR-Tools CP-SAT) or ``milp`` (the paper's ILP through PuLP/CBC)."""
    time_limit_s: float | None = None
    """Wall-clock limit of the exact search; the answer is the best found by then, so on
    a loaded machine it may be another one. None: 10 s, or none at all under a
    `work_limit` (`wall_limit_s`)."""
    work_limit: float | None = None
    """A deterministic budget: CP-SAT's deterministic time (OR-Tools' count of its search
    work, scaled to about a second each; on gpt1.5b-p8-m24 a unit took 1.5-3.5 s of CPU
    here, the whole solve counted), summed over every CP-SAT solve of the search
    (relaxation, probes, phases, windows), which split it as they split the time. The same
    profile, options and budget give the same schedule on any machine load
    (`solver.exact.work_limit`). With `time_limit_s` as well, the wall limit still caps,
    and where it binds the answer depends on the load again. ``cpsat`` only: CBC has no
    deterministic budget."""
    workers: int = 2
    """CP-SAT search workers (threads). Under a work limit the answer depends on it (the
    workers then interleave their search: `solver.exact.work_limit`), never on the load."""
    fifo: bool = True
    """Each op kind in microbatch order per stage (the paper's model); False frees the
    order of B and W."""
    milp_solver: str | None = None
    """A PuLP solver name for the MILP backend (default: the bundled CBC)."""
    lns: bool | None = None
    """CP-SAT re-solving one window of the order at a time (`solver.lns`) instead of the
    whole model; None: where the whole model is too large to gain anything in seconds
    (more than `LNS_MIN_OPS` ops)."""
    seed: int | None = None
    """CP-SAT's random seed (a run repeats exactly under a `work_limit` alone)."""

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ProfileError("backend", self.backend, " or ".join(BACKENDS))
        if self.time_limit_s is not None and not self.time_limit_s > 0:
            raise ProfileError("time_limit", self.time_limit_s, "a number of seconds > 0")
        if self.work_limit is not None:
            if not (self.work_limit > 0 and math.isfinite(self.work_limit)):
                raise ProfileError("work_limit", self.work_limit, "a finite number > 0 "
                                   "(CP-SAT deterministic seconds)")
            if self.backend != "cpsat":
                raise ProfileError("work_limit", self.work_limit, "none with backend "
                                   f"{self.backend} (CBC has no deterministic budget: give "
                                   "time_limit, or use backend cpsat)")
        if self.workers < 1:
            raise ProfileError("workers", self.workers, "an integer >= 1")

    @property
    def wall_limit_s(self) -> float:
        """The wall limit in force, in seconds (math.inf: none, under a work limit)."""
        return wall_limit(self.time_limit_s, self.work_limit)


class Relaxed(NamedTuple):
    """What `relaxation_first` returns."""

    bound: float
    """The relaxation's bound (0.0 when it did not run or proved nothing)."""
    options: ExactOptions
    """The options left for the exact model (its budgets less what the relaxation took)."""
    work: float | None
    """CP-SAT's deterministic time the relaxation spent (None: it did not run)."""


def relaxation_first(problem: Problem, best: float, options: ExactOptions) -> Relaxed:
    """The memory relaxation's bound (`solver.memory_relaxation`, or `solver.v_relaxation`
    for the V cut) within a share of the time limit (and of the work limit), and the
    options left for the exact model.

    Its bound holds over every valid schedule, so it joins `metrics.lower_bound`; where
    memory does not bind, the relaxation does not apply, the general bound already meets
    `best` or the microbatches are too many to gain in time, it takes no time.
    """
    if problem.num_microbatches > RELAXATION_MAX_MICROBATCHES \
            or lower_bound(problem) >= best - 1e-9 * max(1.0, best):
        return Relaxed(0.0, options, None)
    runs_of = v_relaxation_runs if applies_to_v(problem) else relaxation_runs
    wall, work = options.wall_limit_s, options.work_limit
    began = time.perf_counter()
    runs = runs_of(problem, time_limit_s=RELAXATION_SHARE * wall, workers=options.workers,
                   stop_at=best, work_limit=None if work is None else RELAXATION_SHARE * work)
    bound = max((run.bound for run in runs), default=0.0)
    spent = sum(run.work for run in runs)
    if math.isfinite(wall):  # no wall limit: the clock decides nothing
        wall = max(wall - (time.perf_counter() - began), RELAXATION_SHARE * wall)
    if work is not None:
        work = max(work - spent, RELAXATION_SHARE * work)
    return Relaxed(bound, replace(options, time_limit_s=wall if math.isfinite(wall) else None,
                                  work_limit=work), spent if runs else None)


def refine(profile: Profile, hint: Orders, objective: str, options: ExactOptions,
           on_progress: ProgressFn | None = None) -> ExactResult:
    """Run the chosen exact backend from `hint`; the result is never worse than it.

    When the general lower bound already meets the hint's objective the hint is optimal
    over all schedules, and no backend runs.
    """
    problem = profile.problem
    began = time.perf_counter()
    if offers_policies(problem) and options.backend != "cpsat":
        raise ProfileError("backend", options.backend, "cpsat for a profile that offers "
                           "recompute or offload (the MILP has no activation policies)")
    proven = proven_by_bound(problem, hint, objective, options.backend, began)
    if proven is not None:
        if on_progress is not None:
            on_progress(proven.progress[-1])
        return proven
    kept = _hint_the_models_cannot_hold(problem, hint, objective, options.backend, began)
    if kept is not None:
        return kept
    if offers_policies(problem):
        return _refine_policies(problem, hint, objective, options, on_progress, began)
    if options.backend == "milp":
        from ppsched.solver.exact.milp import solve_milp  # PuLP is imported only when asked for

        return solve_milp(problem, hint, objective=objective,
                          time_limit_s=options.wall_limit_s, fifo=options.fifo,
                          solver_name=options.milp_solver, on_progress=on_progress)
    num_ops = 3 * problem.num_stages * problem.num_microbatches
    # The window search reads one duration per stage: alike microbatches only.
    if problem.uniform_microbatches and (
            options.lns or (options.lns is None and num_ops > LNS_MIN_OPS)):
        from ppsched.solver.exact.lns import solve_lns

        return solve_lns(problem, hint, objective=objective,
                         time_limit_s=options.time_limit_s, workers=options.workers,
                         seed=options.seed or 0, on_progress=on_progress,
                         work_limit=options.work_limit)
    from ppsched.solver.exact import multichunk  # OR-Tools only when asked for

    if multichunk.applies(problem):  # V or loop where memory binds: whole model, windows
        return multichunk.solve_multichunk(
            problem, hint, objective=objective, time_limit_s=options.wall_limit_s,
            workers=options.workers, fifo=options.fifo, on_progress=on_progress,
            seed=options.seed, deterministic_s=options.work_limit)
    from ppsched.solver.exact.cpsat import (
        solve_cpsat_phased,  # OR-Tools is imported only when asked for
    )

    return solve_cpsat_phased(problem, hint, objective=objective,
                              time_limit_s=options.time_limit_s, workers=options.workers,
                              fifo=options.fifo, on_progress=on_progress, seed=options.seed,
                              deterministic_s=options.work_limit)


def _hint_the_models_cannot_hold(problem: Problem, hint: Orders, objective: str,
                                 backend: str, began: float) -> ExactResult | None:
    """The hint, kept as it is, when the exact models cannot even represent it.

    The models split every fused BW into B then W. Where `m_w > m_b` (DESIGN.md 6.1) the
    split B holds more than the F did, so a heuristic schedule that fits the limit only
    thanks to its fused BWs breaks it once split: no model search can start from it, and
    the answer is the heuristic's, with the general bound.
    """
    if simulate(problem, split_fused(hint)).ok:
        return None
    sim = simulate(problem, hint)
    assert sim.metrics is not None, "the hint must be valid"
    value = sim.metrics.objective(objective)
    logger.warning("the exact models split fused BWs, and this schedule's BWs (m_w > m_b) "
                   "do not fit the memory limit once split: keeping the heuristic's schedule")
    return ExactResult("heuristic", hint, value, sim.metrics.lower_bound,
                       time.perf_counter() - began, backend, scope=SCOPE_ALL)


def _refine_policies(problem: Problem, hint: Orders, objective: str, options: ExactOptions,
                     on_progress: ProgressFn | None, began: float) -> ExactResult:
    """`refine` for a profile that offers recompute or offload: the CP-SAT model with a
    policy per activation (`solver.cpsat_policies`)."""
    num_ops = 5 * problem.num_stages * problem.num_microbatches
    if num_ops > LNS_MIN_OPS:
        # The whole model gains nothing in a minute at this size (issue 11) and the
        # window search has no policies: the heuristic's schedule stays, with the general
        # bound.
        sim = simulate(problem, hint)
        assert sim.metrics is not None, "the hint must be valid"
        logger.warning("%d ops: too large for the CP-SAT model with policies; keeping the "
                       "heuristic's schedule", num_ops)
        return ExactResult("heuristic", hint, sim.metrics.objective(objective),
                           sim.metrics.lower_bound, time.perf_counter() - began, "cpsat",
                           scope=SCOPE_ALL)
    from ppsched.solver.exact.cpsat_policies import (
        solve_cpsat_policies,  # OR-Tools only when asked for
    )

    return solve_cpsat_policies(problem, hint, objective=objective,
                                time_limit_s=options.time_limit_s, workers=options.workers,
                                fifo=options.fifo, on_progress=on_progress, seed=options.seed,
                                deterministic_s=options.work_limit)
