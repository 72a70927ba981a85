"""Solving: a profile and a method in, a validated, timed Schedule out.

The one entry point the CLI (and later the service) calls. Methods are the registry's
named schedules and ``heuristic`` (the Zero Bubble heuristic with its knob search).
"""

from __future__ import annotations

import time

from solver.errors import ProfileError
from solver.generators import REGISTRY, get_generator
from solver.heuristic import zb_heuristic
from solver.profile import Profile
from solver.schedule import Schedule, schedule_from_orders

HEURISTIC = "heuristic"
OBJECTIVES = ("cost", "makespan")


def methods() -> dict[str, str]:
    """Method name -> one-line description, for listings and error messages."""
    listing = {HEURISTIC: "Zero Bubble heuristic (paper section 3.1) with a search over its "
               "warm-up and W-fill knobs; honours per-stage times, t_comm and memory_limit"}
    listing.update({name: gen.summary for name, gen in sorted(REGISTRY.items())})
    return listing


def solve(profile: Profile, method: str = HEURISTIC, objective: str = "cost") -> Schedule:
    """Build the schedule `method` makes for `profile`, validated by the simulator.

    Raises:
        ProfileError: unknown method or objective, or a shape the method does not support.
        ScheduleInvalid: a named schedule that breaks the profile (e.g. its memory limit).
    """
    if objective not in OBJECTIVES:
        raise ProfileError("objective", objective, " or ".join(OBJECTIVES))
    began = time.perf_counter()
    problem = profile.problem
    if method == HEURISTIC:
        orders = zb_heuristic(problem, objective).orders
        name = "zb-heuristic"
    else:
        if method not in REGISTRY:
            raise ProfileError("method", method, "one of " + ", ".join(methods()))
        orders = get_generator(method)(problem)
        name = method
    wall_s = time.perf_counter() - began
    return schedule_from_orders(profile, orders, name, status="heuristic", wall_s=wall_s,
                                objective=objective)
