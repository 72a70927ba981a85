"""Solving: a profile and a method in, a validated, timed Schedule out.

The one entry point the CLI (and later the service) calls. Methods are the registry's
named schedules, ``heuristic`` (the Zero Bubble heuristic with its knob search) and
``ilp`` (the heuristic refined by an exact model: CP-SAT, or a MILP through PuLP).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from solver.chunking import with_chunks
from solver.errors import ProfileError, ScheduleInvalid
from solver.exact import ExactResult, ProgressFn
from solver.fb_fusion import fuse_fb
from solver.generators import REGISTRY, Orders, get_generator
from solver.greedy import greedy_search
from solver.heuristic import zb_heuristic
from solver.ops import parts
from solver.profile import Problem, Profile
from solver.render.grid import order_grid
from solver.schedule import Schedule, schedule_from_simulation
from solver.simulator import simulate

HEURISTIC = "heuristic"
ILP = "ilp"
OBJECTIVES = ("cost", "makespan")
BACKENDS = ("cpsat", "milp")


@dataclass(frozen=True, kw_only=True)
class ExactOptions:
    """How the ``ilp`` method searches."""

    backend: str = "cpsat"
    """``cpsat`` (OR-Tools CP-SAT) or ``milp`` (the paper's ILP through PuLP/CBC)."""
    time_limit_s: float = 10.0
    """Wall-clock limit of the exact search; the answer is the best found by then."""
    workers: int = 2
    """CP-SAT search workers (threads)."""
    fifo: bool = True
    """Each op kind in microbatch order per stage (the paper's model); False frees the
    order of B and W."""
    milp_solver: str | None = None
    """A PuLP solver name for the MILP backend (default: the bundled CBC)."""

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ProfileError("backend", self.backend, " or ".join(BACKENDS))
        if not self.time_limit_s > 0:
            raise ProfileError("time_limit", self.time_limit_s, "a number of seconds > 0")
        if self.workers < 1:
            raise ProfileError("workers", self.workers, "an integer >= 1")


Layout = tuple[int, str | None]
"""Chunks per rank and placement: ``(1, None)``, ``(2, "v")``, ``(2, "loop")``, ..."""


def parse_layouts(text: str) -> tuple[Layout, ...]:
    """Layouts from their short names, comma-separated: ``1``, ``v`` (or ``v2``), ``loopN``.

    Raises:
        ProfileError: naming the bad entry and the accepted forms.
    """
    layouts: list[Layout] = []
    for item in (x.strip().lower() for x in text.split(",")):
        if item == "1":
            layouts.append((1, None))
        elif item in ("v", "v2"):
            layouts.append((2, "v"))
        elif item.startswith("loop") and item[4:].isdigit() and int(item[4:]) >= 2:
            layouts.append((int(item[4:]), "loop"))
        else:
            raise ProfileError("layouts", item, "a comma-separated list of 1 (one stage per "
                               "rank), v (V placement, 2 chunks) and loopN (N >= 2 chunks, "
                               "loop placement), e.g. 1,v,loop2")
    return tuple(dict.fromkeys(layouts))


def layout_name(layout: Layout) -> str:
    """The short name `parse_layouts` reads."""
    chunks, placement = layout
    return "1" if chunks == 1 else ("v" if placement == "v" else f"loop{chunks}")


def methods() -> dict[str, str]:
    """Method name -> one-line description, for listings and error messages."""
    listing = {
        HEURISTIC: "Zero Bubble heuristic (paper section 3.1) with a search over its "
        "warm-up and W-fill knobs; honours per-stage times, t_comm and memory_limit",
        ILP: "the heuristic refined by an exact model (CP-SAT, or the paper's MILP via "
        "PuLP), with a proven bound and gap; anytime within --time-limit",
    }
    listing.update({name: gen.summary for name, gen in sorted(REGISTRY.items())})
    return listing


def solve(profile: Profile, method: str = HEURISTIC, objective: str = "cost", *,
          exact: ExactOptions | None = None, on_progress: ProgressFn | None = None,
          layouts: tuple[Layout, ...] = (), ) -> Schedule:
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

    Raises:
        ProfileError: unknown method or objective, a shape the method does not support,
            or a named schedule that needs more memory than the limit (with the amount).
        ScheduleInvalid: a generated order that breaks the contract (a bug: never expected).
    """
    if objective not in OBJECTIVES:
        raise ProfileError("objective", objective, " or ".join(OBJECTIVES))
    if method not in (HEURISTIC, ILP) and method not in REGISTRY:
        raise ProfileError("method", method, "one of " + ", ".join(methods()))
    began = time.perf_counter()
    candidates = _layout_profiles(profile, layouts)
    refined: ExactResult | None = None
    if method in (HEURISTIC, ILP):
        best = None
        for candidate in candidates:
            orders, name, value = heuristic_orders(candidate.problem, objective)
            if best is None or value < best[0] - 1e-9:
                best = (value, candidate, orders, name)
        assert best is not None
        value, profile, orders, name = best
        if profile.problem.overlap < 1:
            fused = fuse_fb(profile.problem, orders, objective)
            if fused != orders:
                orders, name = fused, f"{name}+fb"
                metrics = simulate(profile.problem, orders).metrics
                assert metrics is not None  # fuse_fb keeps only valid orders
                value = metrics.objective(objective)
        if method == ILP:
            # The exact models have no FB op (DESIGN.md 6.4): they start from the FBs run
            # as their parts, and an FB heuristic result they do not beat stays.
            hint = [[part for op in ops for part in parts(op)] for ops in orders]
            refined = refine(profile, hint, objective, exact or ExactOptions(), on_progress)
            assert refined.orders is not None  # a valid profile always admits a schedule
            if hint == orders or (refined.objective or 0.0) <= value:
                orders, name = refined.orders, f"ilp-{refined.backend}"
    else:
        generator = get_generator(method)
        profile = next((c for c in candidates if generator.supports(c.problem)), profile)
        orders = generator(profile.problem)
        name = method
    wall_s = time.perf_counter() - began
    problem = profile.problem
    sim = simulate(problem, orders)
    if sim.violations and all(v.kind == "memory" for v in sim.violations):
        # A named schedule over the limit is the user's choice to fix: say how.
        raise ProfileError("memory_limit", profile.memory_limit,
                           f">= {max(sim.memory_peak):g} for {method} (its peak memory per "
                           f"rank is {' '.join(f'{x:g}' for x in sim.memory_peak)}), or a "
                           f"method that fits the limit, such as '{HEURISTIC}'")
    if sim.violations:
        raise ScheduleInvalid(sim.violations, order_grid(sim.order, sim.violations))
    # The exact models have no FB op (DESIGN.md 6.4): with overlap < 1 an FB schedule may
    # beat all they search, so their bound and "optimal" hold only without FB.
    fb_scope = refined is not None and problem.overlap < 1
    status = refined.status if refined else "heuristic"
    schedule = schedule_from_simulation(
        profile, sim, name,
        status="feasible" if fb_scope and status == "optimal" else status,
        wall_s=wall_s, objective=objective,
        bound=refined.bound if refined and not fb_scope else None)
    if fb_scope and refined is not None and schedule.solver is not None:
        schedule.solver.bound_without_fb = refined.bound  # scope named, not lower_bound
    if refined is not None and schedule.solver is not None:
        # Extra fields (DESIGN.md section 4 allows them): how the search went.
        schedule.solver.backend = refined.backend
        schedule.solver.fifo = (exact or ExactOptions()).fifo
        schedule.solver.progress = [list(p) for p in refined.progress]
    return schedule


def heuristic_orders(problem: Problem, objective: str = "cost",
                     ) -> tuple[Orders, str, float]:
    """The heuristic's orders, the method name they go by and their objective, for any
    shape.

    One chunk per rank: the Zero Bubble heuristic with its knob search. Several: the
    greedy list scheduler's search together with the named schedules of the placement
    (ZB-V, V-Half, V-Min, interleaved 1F1B) that fit the memory limit.
    """
    if problem.num_chunks == 1:
        build = zb_heuristic(problem, objective)  # a build times itself as the simulator
        return build.orders, "zb-heuristic", build.objective(objective)
    orders, source, value = greedy_search(problem, objective)
    name = "greedy-heuristic" if source == "greedy" else f"heuristic:{source}"
    return orders, name, value


def _layout_profiles(profile: Profile, layouts: tuple[Layout, ...]) -> list[Profile]:
    """The profile re-cut for each allowed layout (the profile alone if none are given)."""
    if not layouts:
        return [profile]
    if profile.num_chunks != 1:
        if all(layout == (profile.num_chunks, profile.placement) for layout in layouts):
            return [profile]
        raise ProfileError("layouts", ",".join(map(layout_name, layouts)),
                           "layouts only for a profile with num_chunks = 1 (this one is "
                           f"already cut into {profile.num_chunks} chunks per rank)")
    return [with_chunks(profile, chunks, placement) for chunks, placement in layouts]


def refine(profile: Profile, hint: list, objective: str, options: ExactOptions,
           on_progress: ProgressFn | None = None) -> ExactResult:
    """Run the chosen exact backend from `hint`; the result is never worse than it."""
    problem = profile.problem
    if options.backend == "milp":
        from solver.milp import solve_milp  # PuLP is imported only when asked for

        return solve_milp(problem, hint, objective=objective,
                          time_limit_s=options.time_limit_s, fifo=options.fifo,
                          solver_name=options.milp_solver, on_progress=on_progress)
    from solver.cpsat import solve_cpsat  # OR-Tools is imported only when asked for

    return solve_cpsat(problem, hint, objective=objective, time_limit_s=options.time_limit_s,
                       workers=options.workers, fifo=options.fifo, on_progress=on_progress)
