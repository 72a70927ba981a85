"""The heuristic pipeline and `solve` for one order of entry: the best heuristic result
over the allowed layouts (with FB fusion where F and B overlap), refined by an exact model
for ``ilp``, or a named schedule; then simulated, checked and wrapped as a `Schedule`.
"""

from __future__ import annotations

import dataclasses
import math
import time

from ppsched.solver.exact import improvements
from ppsched.solver.exact.frame import ExactResult, ProgressFn
from ppsched.solver.generators import get_generator
from ppsched.solver.heuristic.decisions import decision_problems
from ppsched.solver.heuristic.fb_fusion import fuse_fb
from ppsched.solver.heuristic.greedy import raced_greedy_search
from ppsched.solver.heuristic.improve import improve, runs_on
from ppsched.solver.heuristic.lookahead import MARK as LOOKAHEAD_MARK
from ppsched.solver.heuristic.search import zb_heuristic
from ppsched.solver.model.errors import ProfileError, ScheduleInvalid
from ppsched.solver.model.ops import Orders, parts
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import Profile
from ppsched.solver.model.schedule import Schedule
from ppsched.solver.policies.fit import offers_policies, policy_orders
from ppsched.solver.sim.emit import schedule_from_simulation
from ppsched.solver.sim.kernel import forget_tables
from ppsched.solver.sim.result import Simulation
from ppsched.solver.sim.simulator import simulate
from ppsched.solver.solving.first_best import first_best
from ppsched.solver.solving.gc_pause import collector_paused
from ppsched.solver.solving.layout_bounds import LayoutBounds, apply_layout_bounds, layout_of
from ppsched.solver.solving.layouts import Layout, candidate_profiles
from ppsched.solver.solving.method_names import HEURISTIC, ILP
from ppsched.solver.solving.refine import ExactOptions, refine, relaxation_first


def solve_in_order(profile: Profile, method: str, objective: str,
                   exact: ExactOptions | None, on_progress: ProgressFn | None,
                   layouts: tuple[Layout, ...], start: Schedule | None = None,
                   ops: bool = True) -> Schedule:
    """`solve` for one order of the microbatches: the profile's own. `start`: for
    ``ilp``, a schedule of one of the candidate layouts to refine instead of the
    heuristic's when it is better (a job's checkpoint, `_better_start`). `ops`: as
    `solve`'s."""
    began = time.perf_counter()
    candidates = candidate_profiles(profile, method, layouts)
    refined: ExactResult | None = None
    if method in (HEURISTIC, ILP):
        # The heuristic and `ilp` consider every candidate layout: the printed bound
        # holds over all of them (DESIGN.md 6.6).
        bounds = LayoutBounds.of(candidates)
        profile, orders, name, value = _best_over_layouts(candidates, objective, bounds)
        if method == ILP and start is not None:
            profile, orders, name, value = _better_start(
                candidates, start, objective, (profile, orders, name, value))
        if method == ILP:
            options = exact or ExactOptions()
            options, work = _relax_layouts(candidates, profile, bounds, value, options)
            orders, name, refined = _refined(profile, orders, name, value, objective,
                                             options, on_progress, work)
    else:
        profile, orders, name = _generated(method, candidates, profile)
        bounds = LayoutBounds.of([profile])  # a named schedule runs on one layout
    sim = _simulated(profile, orders, method)
    forget_tables()  # the search's timing tables: not needed to build the schedule
    # metrics.lower_bound is the simulator's: it holds over every schedule (DESIGN.md
    # section 3) of every layout considered (6.6). An exact model's bound holds over its
    # order family only, so it goes in `solver` with its scope named, never into the
    # metrics. The exact models have no FB op (DESIGN.md 6.4): with overlap < 1 an FB
    # schedule may beat all they search, so their bound and "optimal" hold only without FB.
    fb_scope = refined is not None and profile.problem.overlap < 1
    status = refined.status if refined else "heuristic"
    with collector_paused():
        schedule = schedule_from_simulation(
            profile, sim, name,
            status="feasible" if fb_scope and status == "optimal" else status,
            objective=objective, ops=ops)
    narrow = None if refined is None or fb_scope else (refined.bound, refined.scope)
    apply_layout_bounds(schedule, bounds, narrow)
    # The whole solve: search, exact refinement, the final simulation and the wrapping.
    assert schedule.solver is not None
    schedule.solver.wall_s = time.perf_counter() - began
    if refined is not None:
        _record_search(schedule, refined, fb_scope, exact or ExactOptions())
    return schedule


def _best_over_layouts(candidates: list[Profile], objective: str, bounds: LayoutBounds,
                       ) -> tuple[Profile, Orders, str, float]:
    """The heuristic's best over the candidate profiles: the profile, its orders, their
    name and objective; with F and B overlapping, FB-fused where that helps.

    The answer is the first candidate, replaced by each later one that beats the answer
    so far by more than 1e-9 (`first_best`). A layout whose bound (`bounds`, over every
    schedule of it) shows it cannot change that answer is not searched: the single-chunk
    search at 1p and below, where V wins, was a third of a large solve (issue 27)."""
    with collector_paused():
        index, (orders, name, value) = first_best(
            [bounds.bounds[layout_of(c)] for c in candidates],
            lambda i, below: heuristic_orders(candidates[i].problem, objective, below))
    profile = candidates[index]
    if profile.problem.overlap < 1 and not offers_policies(profile.problem):
        fused = fuse_fb(profile.problem, orders, objective)
        if fused != orders:
            orders, name = fused, f"{name}+fb"
            metrics = simulate(profile.problem, orders).metrics
            assert metrics is not None  # fuse_fb keeps only valid orders
            value = metrics.objective(objective)
    return profile, orders, name, value


def _better_start(candidates: list[Profile], start: Schedule, objective: str,
                  best: tuple[Profile, Orders, str, float],
                  ) -> tuple[Profile, Orders, str, float]:
    """`start`'s orders on the candidate of its layout when they are valid there and beat
    `best` (the heuristic's profile, orders, name and objective); else `best`. CP-SAT
    then starts from them: a job re-run after its replica was lost goes on from its
    checkpoint instead of from the heuristic again."""
    layout = layout_of(start.profile)
    orders = start.orders()
    for candidate in candidates:
        if layout_of(candidate) != layout:
            continue
        with collector_paused():
            sim = simulate(candidate.problem, orders)
        if sim.ok and sim.metrics is not None and \
                sim.metrics.objective(objective) < best[3] - 1e-9:
            return candidate, orders, start.method, sim.metrics.objective(objective)
    return best


def _relax_layouts(candidates: list[Profile], answer: Profile, bounds: LayoutBounds,
                   value: float, options: ExactOptions) -> tuple[ExactOptions, float | None]:
    """The memory relaxation's bound of every candidate layout whose general bound is
    below the heuristic's `value` (the answer's layout first: its bound also decides
    whether the exact model runs), recorded in `bounds`; the options left for the exact
    model and the deterministic time the relaxations spent (None: none ran). Each
    relaxation holds over every schedule of its layout, so a layout it lifts to `value`
    is proven unable to beat the answer."""
    spent: float | None = None
    for candidate in sorted(candidates, key=lambda c: c is not answer):
        relaxed = relaxation_first(candidate.problem, value, options)
        bounds.raise_to(layout_of(candidate), relaxed.bound)
        options = relaxed.options
        if relaxed.work is not None:
            spent = (spent or 0.0) + relaxed.work
    return options, spent


def _refined(profile: Profile, orders: Orders, name: str, value: float, objective: str,
             options: ExactOptions, on_progress: ProgressFn | None,
             relaxation_work: float | None) -> tuple[Orders, str, ExactResult]:
    """The exact refinement of the heuristic's `orders` (objective `value`): the orders
    and name kept, and the exact result (its work counting the relaxations')."""
    # The exact models have no FB op (DESIGN.md 6.4): they start from the FBs run as
    # their parts, and an FB heuristic result they do not beat stays.
    hint = [[part for op in ops for part in parts(op)] for ops in orders]
    with improvements.profile_for(profile):  # improvements are of this profile's problem
        refined = refine(profile, hint, objective, options, on_progress)
    if relaxation_work is not None:  # the work report covers the relaxation's solves too
        refined = dataclasses.replace(refined, work=(refined.work or 0.0) + relaxation_work)
    assert refined.orders is not None  # a valid profile always admits a schedule
    if hint == orders or (refined.objective or 0.0) <= value:
        orders, name = refined.orders, f"ilp-{refined.backend}"
    return orders, name, refined


def _generated(method: str, candidates: list[Profile], profile: Profile,
               ) -> tuple[Profile, Orders, str]:
    """A named schedule, on the first candidate profile its generator supports."""
    generator = get_generator(method)
    profile = next((c for c in candidates if generator.supports(c.problem)), profile)
    with collector_paused():
        orders = generator(profile.problem)
    return profile, orders, method


def _simulated(profile: Profile, orders: Orders, method: str) -> Simulation:
    """`orders` simulated on `profile`.

    Raises:
        ProfileError: a named schedule over the memory limit (the user's choice to fix).
        ScheduleInvalid: an order that breaks the contract otherwise (a bug).
    """
    with collector_paused():
        sim = simulate(profile.problem, orders)
    if sim.violations and all(v.kind == "memory" for v in sim.violations):
        # A named schedule over the limit is the user's choice to fix: say how.
        raise ProfileError("memory_limit", profile.memory_limit,
                           f">= {max(sim.memory_peak):g} for {method} (its peak memory per "
                           f"rank is {' '.join(f'{x:g}' for x in sim.memory_peak)}), or a "
                           f"method that fits the limit, such as '{HEURISTIC}'")
    if sim.violations:
        raise ScheduleInvalid(sim.violations, order=sim.order)
    return sim


def _record_search(schedule: Schedule, refined: ExactResult, fb_scope: bool,
                   options: ExactOptions) -> None:
    """The exact search's fields of `schedule.solver` (DESIGN.md section 4 allows them)
    beside the bound `apply_layout_bounds` set: the backend, the FIFO flag, the
    progress, and with FB ops the model's bound apart."""
    info = schedule.solver
    assert info is not None
    if fb_scope:
        info.bound_without_fb = refined.bound  # scope named, not the bound
    info.backend = refined.backend
    # The window search keeps no order family: the FIFO flag says nothing there.
    info.fifo = options.fifo if refined.backend != "lns" else None
    info.progress = [list(p) for p in refined.progress]
    info.work = refined.work


def heuristic_orders(problem: Problem, objective: str = "cost", below: float = math.inf,
                     ) -> tuple[Orders, str, float]:
    """The heuristic's orders, the method name they go by and their objective, for any
    shape.

    One chunk per rank: the Zero Bubble heuristic with its knob search (the paper's
    algorithm among its candidates). Several: the greedy list scheduler's search together
    with the named schedules of the placement (ZB-V, V-Half, V-Min, interleaved 1F1B)
    that fit the memory limit, and where ZB-V does not, V-Half's and V-Min's orders
    list-scheduled with a lookahead window (`solver.lookahead`). Then the local search of
    `solver.improve` (the name gets ``+local`` when it helped). A profile that offers
    recompute or offload (DESIGN.md 6.3) also gets a policy per activation
    (`solver.policies`).

    `below`: a value under which only the answer matters (`first_best`: an earlier
    layout's answer). A large order's several-chunk search races against it
    (`raced_greedy_search`), so where its answer is not below it, the result may not be
    either, or be none (empty orders, value inf). Not used by the single-chunk search
    or with unequal microbatches; with policies, the search fits nothing that cannot get
    below it (`solver.policies.fit.policy_orders`).
    """
    if offers_policies(problem):
        return policy_orders(problem, objective, _keep_heuristic_orders, below)
    return _keep_heuristic_orders(problem, objective, below)


def _keep_heuristic_orders(problem: Problem, objective: str = "cost",
                           below: float = math.inf) -> tuple[Orders, str, float]:
    """`heuristic_orders` with every activation kept (sections 2-4)."""
    value, orders, name = _best_heuristic(problem, objective, below=below)
    if not orders:
        return orders, name, value  # raced out: nothing below `below`
    # The improvement step: local search on the order, every move re-timed by the
    # simulator, within a fixed budget of simulated ops.
    best = _improved(problem, orders, name, value, objective)
    if LOOKAHEAD_MARK in name and runs_on(orders):
        # The local search ends where its start leads: from the best order without the
        # lookahead candidates it may end lower (3 of 440 random profiles), so it also
        # starts from there, and a lookahead candidate never costs a profile its answer.
        start = _best_heuristic(problem, objective, lookahead=False)
        other = _improved(problem, start[1], start[2], start[0], objective)
        if other[2] < best[2] - 1e-9:
            best = other
    return best


def _best_heuristic(problem: Problem, objective: str, lookahead: bool = True,
                    below: float = math.inf) -> tuple[float, Orders, str]:
    """The best candidate of the searches, before the local search: its objective,
    orders and method name (inf, no orders: none below `below`, see
    `heuristic_orders`)."""
    # Unequal microbatches (DESIGN.md 6.2): the searches read one value per stage, so
    # they decide on `for_decisions` (mean times, each stage's largest memory: an order
    # that fits there fits here), and the order is timed here.
    best: tuple[float, Orders, str] | None = None
    for quantile, decide in decision_problems(problem):
        if problem.num_chunks == 1:
            build = zb_heuristic(decide, objective)  # a build times itself as the simulator
            orders, name, value = build.orders, "zb-heuristic", build.objective(objective)
        else:
            found = raced_greedy_search(decide, objective, lookahead,
                                        below if decide is problem else math.inf)
            if found is None:
                continue  # nothing below `below`
            orders, source, value = found
            name = "greedy-heuristic" if source == "greedy" else f"heuristic:{source}"
        if decide is not problem:
            sim = simulate(problem, orders)
            if not sim.ok or sim.metrics is None:
                # Only lower quantiles may break the limit with the real memory.
                assert quantile < 1.0, "an order valid for the decisions is valid here"
                continue
            value = sim.metrics.objective(objective)
        if best is None or value < best[0] - 1e-9:
            best = (value, orders, name)
    if best is None:
        assert below < math.inf  # the largest memory always gives a valid order
        return math.inf, [], ""
    return best


def _improved(problem: Problem, orders: Orders, name: str, value: float, objective: str,
              ) -> tuple[Orders, str, float]:
    """The local search's result from `orders` (the name gets ``+local`` when it
    helped)."""
    improved = improve(problem, orders, objective)
    if improved is not None and improved[1] < value:
        return improved[0], f"{name}+local", improved[1]
    return orders, name, value
