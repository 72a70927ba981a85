"""Solving: a profile and a method in, a validated, timed Schedule out.

The one entry point the CLI (and later the service) calls. Methods are the registry's
named schedules, ``heuristic`` (the Zero Bubble heuristic with its knob search) and
``ilp`` (the heuristic refined by an exact model: CP-SAT, or a MILP through PuLP). With
unequal microbatches `solve` also chooses their order of entry; the layouts are in
`solving.layouts`, the pipeline for one order in `solving.pipeline`, the exact refinement
and its options (`ExactOptions`) in `solving.refine`.
"""

from __future__ import annotations

import time

from ppsched.solver.exact.frame import SCOPE_ALL, ProgressFn
from ppsched.solver.heuristic.entry_order import entry_orders, inverse, permuted
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.profile import Profile
from ppsched.solver.model.schedule import Schedule
from ppsched.solver.solving.layouts import Layout, loop_layouts
from ppsched.solver.solving.method_names import HEURISTIC, ILP, OBJECTIVES, ZB_LOOP, resolve_method
from ppsched.solver.solving.pipeline import solve_in_order
from ppsched.solver.solving.refine import ExactOptions


def chooses_entry_order(method: str) -> bool:
    """Whether `solve` chooses the order of entry of unequal microbatches for `method`
    (the heuristic and ``ilp`` do; a named schedule keeps the input order)."""
    return resolve_method(method) in (HEURISTIC, ILP)


def solve(profile: Profile, method: str = HEURISTIC, objective: str = "cost", *,
          exact: ExactOptions | None = None, on_progress: ProgressFn | None = None,
          layouts: tuple[Layout, ...] = (), keep_order: bool = False,
          start: Schedule | None = None, ops: bool = True) -> Schedule:
    """Build the schedule `method` makes for `profile`, validated by the simulator.

    Args:
        profile: the validated profile.
        method: ``heuristic``, ``ilp`` or a registry name (see `methods`).
        objective: ``cost`` (largest per-rank span) or ``makespan``.
        exact: options of the ``ilp`` method.
        on_progress: for ``ilp``, called with (seconds, best objective, bound).
        layouts: other ways the user allows to cut a one-chunk profile's model (e.g.
            ``((1, None), (2, "v"))``, see `parse_layouts`). ``heuristic`` and ``ilp``
            take the best heuristic result over them (``ilp`` then refines it); a named
            schedule runs on the first allowed layout it supports. The schedule echoes
            the profile it was solved for: the re-cut one when another layout won.
            None given: `default_layouts` (1, V and loop2 for a one-chunk profile).
        keep_order: with unequal microbatches, keep the profile's order of entry instead
            of choosing one (a data loader that cannot reorder; naive packing).
        start: for ``ilp`` with equal microbatches, a schedule of this profile (on one
            of the layouts considered) that the exact search starts from when it beats
            the heuristic's: a job's checkpoint, so that a re-run goes on from it.
        ops: False leaves out the per-op objects (`ranks` empty), for a schedule only
            written compact (`Schedule.compact_dump`; `solve --compact`): at p=128,
            m=1024 they are a third of the solve's memory.

    Raises:
        ProfileError: unknown method or objective, a shape the method does not support,
            or a named schedule that needs more memory than the limit (with the amount).
        ScheduleInvalid: a generated order that breaks the contract (a bug: never expected).
    """
    if objective not in OBJECTIVES:
        raise ProfileError("objective", objective, " or ".join(OBJECTIVES))
    method = resolve_method(method)  # our names, and torch's (solver/solving/method_names.py)
    if method == ZB_LOOP:
        method, layouts = HEURISTIC, loop_layouts(profile, layouts)
    if start is not None and (method != ILP or not profile.problem.uniform_microbatches):
        raise ValueError("start is for ilp with equal microbatches (unequal ones choose "
                         "their order of entry anew)")
    if profile.problem.uniform_microbatches:
        return solve_in_order(profile, method, objective, exact, on_progress, layouts,
                              start, ops)
    # Unequal microbatches (DESIGN.md 6.2): the order of entry is a decision. The
    # heuristic tries the candidate orders and keeps the best; `ilp` refines the
    # heuristic's best order, so its own bound holds for that order of entry (the general
    # bound, `metrics.lower_bound`, for every order); a named schedule keeps the input
    # order, as its definition gives none.
    began = time.perf_counter()
    candidates = entry_orders(profile.problem) if chooses_entry_order(method) \
        and not keep_order else [tuple(range(profile.num_microbatches))]
    best: tuple[float, tuple[int, ...], Schedule] | None = None
    for order in candidates:
        schedule = solve_in_order(permuted(profile, order), HEURISTIC if method == ILP
                                  else method, objective, exact, None, layouts, ops=ops)
        assert schedule.solver is not None
        if best is None or schedule.solver.objective < best[0] - 1e-9:
            best = (schedule.solver.objective, order, schedule)
    assert best is not None
    _, order, schedule = best
    if method == ILP:
        schedule = solve_in_order(permuted(profile, order), ILP, objective, exact,
                                  on_progress, layouts, ops=ops)
        assert schedule.solver is not None
        scope = schedule.solver.bound_scope
        if scope is not None and not scope.startswith(SCOPE_ALL):
            schedule.solver.bound_scope = f"{scope}, in this microbatch_order"
    # Echo the profile as given (input order) and say which input microbatch each is.
    schedule.profile = permuted(schedule.profile, inverse(order))
    schedule.microbatch_order = list(order) if list(order) != sorted(order) else None
    assert schedule.solver is not None
    schedule.solver.wall_s = time.perf_counter() - began
    return schedule
