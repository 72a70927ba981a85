"""Solving: a profile and a method in, a validated, timed Schedule out.

The one entry point the CLI (and later the service) calls. Methods are the registry's
named schedules and ``heuristic`` (the Zero Bubble heuristic with its knob search).
"""

from __future__ import annotations

import time

from solver.errors import ProfileError, ScheduleInvalid
from solver.generators import REGISTRY, get_generator
from solver.heuristic import zb_heuristic
from solver.profile import Profile
from solver.render.grid import order_grid
from solver.schedule import Schedule, schedule_from_simulation
from solver.simulator import simulate

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
        ProfileError: unknown method or objective, a shape the method does not support,
            or a named schedule that needs more memory than the limit (with the amount).
        ScheduleInvalid: a generated order that breaks the contract (a bug: never expected).
    """
    if objective not in OBJECTIVES:
        raise ProfileError("objective", objective, " or ".join(OBJECTIVES))
    if method != HEURISTIC and method not in REGISTRY:
        raise ProfileError("method", method, "one of " + ", ".join(methods()))
    began = time.perf_counter()
    problem = profile.problem
    if method == HEURISTIC:
        orders = zb_heuristic(problem, objective).orders
        name = "zb-heuristic"
    else:
        orders = get_generator(method)(problem)
        name = method
    wall_s = time.perf_counter() - began
    sim = simulate(problem, orders)
    if sim.violations and all(v.kind == "memory" for v in sim.violations):
        # A named schedule over the limit is the user's choice to fix: say how.
        raise ProfileError("memory_limit", profile.memory_limit,
                           f">= {max(sim.memory_peak):g} for {method} (its peak memory per "
                           f"rank is {' '.join(f'{x:g}' for x in sim.memory_peak)}), or a "
                           f"method that fits the limit, such as '{HEURISTIC}'")
    if sim.violations:
        raise ScheduleInvalid(sim.violations, order_grid(sim.order, sim.violations))
    return schedule_from_simulation(profile, sim, name, status="heuristic", wall_s=wall_s,
                                    objective=objective)
