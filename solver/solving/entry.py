"""Solving: a profile and a method in, a validated, timed Schedule out.

The one entry point the CLI (and later the service) calls. Methods are the registry's
named schedules, ``heuristic`` (the Zero Bubble heuristic with its knob search) and
``ilp`` (the heuristic refined by an exact model: CP-SAT, or a MILP through PuLP).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace

from ppsched.solver.exact.frame import (
    SCOPE_ALL,
    ExactResult,
    ProgressFn,
    proven_by_bound,
    split_fused,
)
from ppsched.solver.exact.memory_relaxation import memory_relaxation_bound
from ppsched.solver.exact.v_relaxation import applies as applies_to_v
from ppsched.solver.exact.v_relaxation import v_memory_relaxation_bound
from ppsched.solver.generators import get_generator
from ppsched.solver.heuristic.decisions import decision_problems
from ppsched.solver.heuristic.entry_order import entry_orders, inverse, permuted
from ppsched.solver.heuristic.fb_fusion import fuse_fb
from ppsched.solver.heuristic.greedy import greedy_search
from ppsched.solver.heuristic.improve import improve, runs_on
from ppsched.solver.heuristic.lookahead import MARK as LOOKAHEAD_MARK
from ppsched.solver.heuristic.search import zb_heuristic
from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.errors import ProfileError, ScheduleInvalid
from ppsched.solver.model.ops import Orders, parts
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import Profile
from ppsched.solver.model.schedule import Schedule
from ppsched.solver.policies.fit import offers_policies, policy_orders
from ppsched.solver.sim.emit import schedule_from_simulation
from ppsched.solver.sim.simulator import simulate
from ppsched.solver.solving.gc_pause import collector_paused
from ppsched.solver.solving.method_names import HEURISTIC, ILP, OBJECTIVES, ZB_LOOP, resolve_method

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
    time_limit_s: float = 10.0
    """Wall-clock limit of the exact search; the answer is the best found by then."""
    workers: int = 2
    """CP-SAT search workers (threads)."""
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
    """CP-SAT's random seed (with ``workers=1``, runs repeat exactly up to wall time)."""

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


def chooses_entry_order(method: str) -> bool:
    """Whether `solve` chooses the order of entry of unequal microbatches for `method`
    (the heuristic and ``ilp`` do; a named schedule keeps the input order)."""
    return resolve_method(method) in (HEURISTIC, ILP)


def solve(profile: Profile, method: str = HEURISTIC, objective: str = "cost", *,
          exact: ExactOptions | None = None, on_progress: ProgressFn | None = None,
          layouts: tuple[Layout, ...] = (), keep_order: bool = False) -> Schedule:
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
            None given: `default_layouts` (the V cut joins where memory binds).
        keep_order: with unequal microbatches, keep the profile's order of entry instead
            of choosing one (a data loader that cannot reorder; naive packing).

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
    if profile.problem.uniform_microbatches:
        return _solve_in_order(profile, method, objective, exact, on_progress, layouts)
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
        schedule = _solve_in_order(permuted(profile, order), HEURISTIC if method == ILP
                                   else method, objective, exact, None, layouts)
        assert schedule.solver is not None
        if best is None or schedule.solver.objective < best[0] - 1e-9:
            best = (schedule.solver.objective, order, schedule)
    assert best is not None
    _, order, schedule = best
    if method == ILP:
        schedule = _solve_in_order(permuted(profile, order), ILP, objective, exact,
                                   on_progress, layouts)
        assert schedule.solver is not None
        scope = schedule.solver.bound_scope
        if scope != SCOPE_ALL:
            schedule.solver.bound_scope = f"{scope}, in this microbatch_order"
    # Echo the profile as given (input order) and say which input microbatch each is.
    schedule.profile = permuted(schedule.profile, inverse(order))
    schedule.microbatch_order = list(order) if list(order) != sorted(order) else None
    assert schedule.solver is not None
    schedule.solver.wall_s = time.perf_counter() - began
    return schedule


def _solve_in_order(profile: Profile, method: str, objective: str,
                    exact: ExactOptions | None, on_progress: ProgressFn | None,
                    layouts: tuple[Layout, ...]) -> Schedule:
    """`solve` for one order of the microbatches: the profile's own."""
    began = time.perf_counter()
    if layouts:
        candidates = _layout_profiles(profile, layouts)
    else:
        candidates = [profile]
        for layout in default_layouts(profile, method)[1:]:
            try:
                candidates.append(with_chunks(profile, *layout))
            except ProfileError:
                pass  # a shape the placement does not take: the default only offers it
    refined: ExactResult | None = None
    relaxed = 0.0  # the memory relaxation's bound (`_relaxation_first`), if it ran
    if method in (HEURISTIC, ILP):
        best = None
        with collector_paused():
            for candidate in candidates:
                orders, name, value = heuristic_orders(candidate.problem, objective)
                if best is None or value < best[0] - 1e-9:
                    best = (value, candidate, orders, name)
        assert best is not None
        value, profile, orders, name = best
        if profile.problem.overlap < 1 and not offers_policies(profile.problem):
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
            relaxed, options = _relaxation_first(profile.problem, value, exact or ExactOptions())
            refined = refine(profile, hint, objective, options, on_progress)
            assert refined.orders is not None  # a valid profile always admits a schedule
            if hint == orders or (refined.objective or 0.0) <= value:
                orders, name = refined.orders, f"ilp-{refined.backend}"
    else:
        generator = get_generator(method)
        profile = next((c for c in candidates if generator.supports(c.problem)), profile)
        with collector_paused():
            orders = generator(profile.problem)
        name = method
    problem = profile.problem
    with collector_paused():
        sim = simulate(problem, orders)
    if sim.violations and all(v.kind == "memory" for v in sim.violations):
        # A named schedule over the limit is the user's choice to fix: say how.
        raise ProfileError("memory_limit", profile.memory_limit,
                           f">= {max(sim.memory_peak):g} for {method} (its peak memory per "
                           f"rank is {' '.join(f'{x:g}' for x in sim.memory_peak)}), or a "
                           f"method that fits the limit, such as '{HEURISTIC}'")
    if sim.violations:
        raise ScheduleInvalid(sim.violations, order=sim.order)
    # metrics.lower_bound is the simulator's: it holds over every schedule (DESIGN.md
    # section 3). An exact model's bound holds over its order family only, so it goes in
    # `solver` with its scope named, never into the metrics. The exact models have no FB
    # op (DESIGN.md 6.4): with overlap < 1 an FB schedule may beat all they search, so
    # their bound and "optimal" hold only without FB.
    fb_scope = refined is not None and profile.problem.overlap < 1
    status = refined.status if refined else "heuristic"
    with collector_paused():
        schedule = schedule_from_simulation(
            profile, sim, name,
            status="feasible" if fb_scope and status == "optimal" else status,
            objective=objective, bound=relaxed or None)
    assert schedule.solver is not None
    schedule.solver.bound_scope = SCOPE_ALL
    # The whole solve: search, exact refinement, the final simulation and the wrapping.
    schedule.solver.wall_s = time.perf_counter() - began
    if refined is not None:
        # Extra fields (DESIGN.md section 4 allows them): how the search went.
        info = schedule.solver
        if fb_scope:
            info.bound_without_fb = refined.bound  # scope named, not the bound
        else:
            value = info.objective
            info.bound = max(info.bound, min(refined.bound, value))  # finish() checked it
            info.gap = (value - info.bound) / value if value > 0 else 0.0
            general = schedule.metrics.lower_bound if schedule.metrics else 0.0
            info.bound_scope = SCOPE_ALL if info.bound <= general else refined.scope
        info.backend = refined.backend
        # The window search keeps no order family: the FIFO flag says nothing there.
        info.fifo = (exact or ExactOptions()).fifo if refined.backend != "lns" else None
        info.progress = [list(p) for p in refined.progress]
    return schedule


def heuristic_orders(problem: Problem, objective: str = "cost",
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
    """
    if offers_policies(problem):
        return policy_orders(problem, objective, _keep_heuristic_orders)
    return _keep_heuristic_orders(problem, objective)


def _keep_heuristic_orders(problem: Problem, objective: str = "cost",
                           ) -> tuple[Orders, str, float]:
    """`heuristic_orders` with every activation kept (sections 2-4)."""
    value, orders, name = _best_heuristic(problem, objective)
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
                    ) -> tuple[float, Orders, str]:
    """The best candidate of the searches, before the local search: its objective,
    orders and method name."""
    # Unequal microbatches (DESIGN.md 6.2): the searches read one value per stage, so
    # they decide on `for_decisions` (mean times, each stage's largest memory: an order
    # that fits there fits here), and the order is timed here.
    best: tuple[float, Orders, str] | None = None
    for quantile, decide in decision_problems(problem):
        if problem.num_chunks == 1:
            build = zb_heuristic(decide, objective)  # a build times itself as the simulator
            orders, name, value = build.orders, "zb-heuristic", build.objective(objective)
        else:
            orders, source, value = greedy_search(decide, objective, lookahead)
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
    assert best is not None  # the largest memory always gives a valid order
    return best


def _improved(problem: Problem, orders: Orders, name: str, value: float, objective: str,
              ) -> tuple[Orders, str, float]:
    """The local search's result from `orders` (the name gets ``+local`` when it
    helped)."""
    improved = improve(problem, orders, objective)
    if improved is not None and improved[1] < value:
        return improved[0], f"{name}+local", improved[1]
    return orders, name, value


# The layouts the heuristic tries by default where memory binds below 1F1B's need.
TIGHT_LAYOUTS: tuple[Layout, ...] = ((1, None), (2, "v"))


def below_one_f_one_b(problem: Problem) -> bool:
    """Whether some rank's limit is below what 1F1B holds there (one chunk per rank:
    rank r keeps min(m, p - r) forwards in flight)."""
    return problem.num_chunks == 1 and problem.below_one_f_one_b()


def default_layouts(profile: Profile, method: str) -> tuple[Layout, ...]:
    """The layouts `solve` considers when the caller names none: the profile's own, and
    for ``heuristic`` and ``ilp`` below 1F1B's memory also the V cut (issue 11: at 0.75p
    the V layout halves what one stage holds and beats the best single-chunk schedule;
    one V search costs about one single-chunk search, so the default stays fast), and
    for a profile that offers recompute or offload under any finite limit too."""
    if method == ZB_LOOP:  # what it solves (the service counts its ops from this)
        return loop_layouts(profile, ())
    if method in (HEURISTIC, ILP) and below_one_f_one_b(profile.problem):
        return TIGHT_LAYOUTS
    problem = profile.problem
    if method in (HEURISTIC, ILP) and problem.num_chunks == 1 and offers_policies(problem) \
            and any(map(math.isfinite, problem.memory_limit)):
        # With policies a limit binds at any level the activations could use: the V cut
        # halves what a stage holds and what each copy moves (issue 12).
        return TIGHT_LAYOUTS
    return ()


def loop_layouts(profile: Profile, layouts: tuple[Layout, ...]) -> tuple[Layout, ...]:
    """The layouts ``zb-loop`` solves: the loop ones given, else two chunks per rank for
    a one-chunk profile, or the profile's own when it is already looped.

    Raises:
        ProfileError: a V-placement profile, or layouts none of which is a loop.
    """
    if profile.num_chunks > 1 and profile.placement != "loop":
        raise ProfileError("method", ZB_LOOP, "a one-chunk or loop-placement profile (this "
                           "one has V placement; zb-v is its zero bubble schedule)")
    if layouts:
        looped = tuple(layout for layout in layouts if layout[1] == "loop")
        if not looped:
            raise ProfileError("layouts", ",".join(map(layout_name, layouts)),
                               f"loopN layouts for {ZB_LOOP} (the loop placement)")
        return looped
    return () if profile.num_chunks > 1 else ((2, "loop"),)


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


def _relaxation_first(problem: Problem, best: float, options: ExactOptions,
                      ) -> tuple[float, ExactOptions]:
    """The memory relaxation's bound (`solver.memory_relaxation`, or `solver.v_relaxation`
    for the V cut) within a share of the time limit, and the options left for the exact
    model.

    Its bound holds over every valid schedule, so it joins `metrics.lower_bound`; where
    memory does not bind, the relaxation does not apply, the general bound already meets
    `best` or the microbatches are too many to gain in time, it takes no time.
    """
    if problem.num_microbatches > RELAXATION_MAX_MICROBATCHES \
            or lower_bound(problem) >= best - 1e-9 * max(1.0, best):
        return 0.0, options
    began = time.perf_counter()
    relaxation = v_memory_relaxation_bound if applies_to_v(problem) \
        else memory_relaxation_bound
    bound = relaxation(problem, time_limit_s=RELAXATION_SHARE * options.time_limit_s,
                       workers=options.workers, stop_at=best)
    spent = time.perf_counter() - began
    left = max(options.time_limit_s - spent, RELAXATION_SHARE * options.time_limit_s)
    return bound, replace(options, time_limit_s=left)


def refine(profile: Profile, hint: list, objective: str, options: ExactOptions,
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
                          time_limit_s=options.time_limit_s, fifo=options.fifo,
                          solver_name=options.milp_solver, on_progress=on_progress)
    num_ops = 3 * problem.num_stages * problem.num_microbatches
    # The window search reads one duration per stage: alike microbatches only.
    if problem.uniform_microbatches and (
            options.lns or (options.lns is None and num_ops > LNS_MIN_OPS)):
        from ppsched.solver.exact.lns import solve_lns

        return solve_lns(problem, hint, objective=objective,
                         time_limit_s=options.time_limit_s, workers=options.workers,
                         seed=options.seed or 0, on_progress=on_progress)
    from ppsched.solver.exact.cpsat import (
        solve_cpsat_phased,  # OR-Tools is imported only when asked for
    )

    return solve_cpsat_phased(problem, hint, objective=objective, time_limit_s=options.time_limit_s,
                       workers=options.workers, fifo=options.fifo, on_progress=on_progress,
                       seed=options.seed)


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
                                fifo=options.fifo, on_progress=on_progress, seed=options.seed)
