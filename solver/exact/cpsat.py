"""The exact model on OR-Tools CP-SAT, warm-started from the heuristic.

One interval per op, no overlap per rank, the cost model's precedences with latency
across ranks, memory per rank as a reservoir, the largest per-rank span (or the makespan)
minimised. Build and solve are kept apart (`build_model`, `solve_cpsat`); figures come
from re-timing the answer with the simulator (`solver.exact.finish`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass

from ortools.sat.python import cp_model
from ppsched.solver.exact import cpsat_shared, improvements
from ppsched.solver.exact.cpsat_tight import add_order_literals, memory_precedences
from ppsched.solver.exact.cpsat_tight import applies as applies_one_chunk
from ppsched.solver.exact.deadline_probes import Answer, rise_to_optimum
from ppsched.solver.exact.frame import (
    ExactResult,
    Orders,
    Progress,
    ProgressFn,
    Scaled,
    finish,
    first_start_ticks,
    infeasible_result,
    orders_from_starts,
    scope_of,
    split_fused,
)
from ppsched.solver.exact.frame import seed as seed_model
from ppsched.solver.exact.work_limit import MIN_WORK, set_limits, wall_limit
from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.ops import Kind, Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.sim.simulator import simulate

log = logging.getLogger(__name__)

KINDS: tuple[Kind, ...] = ("F", "B", "W")
F_ONLY: tuple[Kind, ...] = ("F",)


@dataclass
class Model:
    """A built CP-SAT model and the handles needed to read and hint it."""

    model: cp_model.CpModel
    start: dict[Op, cp_model.IntVar]
    objective: cp_model.IntVar
    scaled: Scaled


def applies(problem: Problem) -> bool:
    """Whether the order literals apply (one chunk or several per rank): memory binding
    below 1F1B's and a model small enough."""
    return applies_one_chunk(problem) or cpsat_shared.applies(problem)


def build_model(problem: Problem, scaled: Scaled, hint_ticks: dict[Op, int],
                upper_ticks: int, objective: str = "cost", fifo: bool = True,
                bound_cut: bool = True, tight: bool = False) -> Model:
    """The CP-SAT model of `problem` (single and multi-chunk alike: ranks are data).

    Args:
        scaled: the problem in integer ticks and memory units.
        hint_ticks: start of each op in the hint, timed in ticks (list scheduling).
        upper_ticks: the hint's objective in ticks; no better solution exceeds it.
        objective: ``cost`` (largest per-rank span) or ``makespan``.
        fifo: each op kind runs in microbatch order on each stage (the paper's ILP);
            False frees the B and W orders (F stays in order: it fixes each rank's
            first op, see `first_start_ticks`).
        bound_cut: add the memory-aware lower bound as a cut on the objective.
        tight: add the order literals, their exact memory rule and energy cuts
            (`solver.cpsat_tight` for one chunk per rank, `solver.cpsat_shared` for
            several), for limits below 1F1B's memory.
    """
    model = cp_model.CpModel()
    first = first_start_ticks(problem, scaled)
    start, end = _intervals(model, problem, scaled, first, upper_ticks, objective)
    _precedences(model, problem, scaled, start, end, first, fifo)
    _memory(model, problem, scaled, start, end, tight)
    goal = _objective(model, problem, scaled, end, first, upper_ticks, objective, fifo,
                      bound_cut)
    if tight and problem.num_chunks == 1:
        add_order_literals(model, problem, scaled, start, goal, first, hint_ticks,
                           objective, fifo)
    elif tight:  # several stages share a rank's memory (V, loop)
        cpsat_shared.add_shared_order_literals(model, problem, scaled, start, goal, first,
                                               hint_ticks, objective, fifo)
    model.minimize(goal)
    _hints(model, start, hint_ticks, goal, upper_ticks)
    return Model(model, start, goal, scaled)


_Ends = dict[Op, cp_model.LinearExpr]


def _intervals(model: cp_model.CpModel, problem: Problem, scaled: Scaled, first: list[int],
               upper_ticks: int, objective: str) -> tuple[dict[Op, cp_model.IntVar], _Ends]:
    """Intervals: one per op, each microbatch its own duration (DESIGN.md 6.2), no
    overlap per rank. Returns each op's start variable and end expression."""
    rank_of = problem.stage_to_rank
    duration = {"F": scaled.f_mb, "B": scaled.b_mb, "W": scaled.w_mb}
    # Every op of rank r lies in [first[r], first[r] + upper] for the cost objective, and
    # in [0, upper] for the makespan (rank 0 starts at 0).
    window = [(f, f + upper_ticks) if objective == "cost" else (0, upper_ticks)
              for f in first]
    start: dict[Op, cp_model.IntVar] = {}
    end: _Ends = {}
    intervals: list[list[cp_model.IntervalVar]] = [[] for _ in range(problem.num_ranks)]
    for kind in KINDS:
        for s in range(problem.num_stages):
            lo, hi = window[rank_of[s]]
            for j in range(problem.num_microbatches):
                d = duration[kind][s][j]
                op = Op(kind, s, j)
                var = model.new_int_var(lo, max(lo, hi - d), f"start_{kind}_{s}_{j}")
                start[op] = var
                end[op] = var + d
                intervals[rank_of[s]].append(
                    model.new_fixed_size_interval_var(var, d, f"{kind}_{s}_{j}"))
    for rank_intervals in intervals:
        model.add_no_overlap(rank_intervals)
    return start, end


def _precedences(model: cp_model.CpModel, problem: Problem, scaled: Scaled,
                 start: dict[Op, cp_model.IntVar], end: _Ends, first: list[int],
                 fifo: bool) -> None:
    """Precedences (DESIGN.md section 3), with the latency across ranks; the microbatch
    orders; the precedences memory forces; each rank's first start."""
    S, m = problem.num_stages, problem.num_microbatches
    for s in range(S):
        for j in range(m):
            if s > 0:
                model.add(start[Op("F", s, j)] >= end[Op("F", s - 1, j)]
                          + scaled.comm_mb[s - 1][j])
            if s < S - 1:
                model.add(start[Op("B", s, j)] >= end[Op("B", s + 1, j)]
                          + scaled.comm_mb[s][j])
            else:
                model.add(start[Op("B", s, j)] >= end[Op("F", s, j)])
            model.add(start[Op("W", s, j)] >= end[Op("B", s, j)])
    # Microbatch order per stage: for F always (it fixes each rank's first op and breaks
    # the symmetry of identical microbatches); for B and W only in the FIFO model.
    for kind in KINDS if fifo else F_ONLY:
        for s in range(S):
            for j in range(m - 1):
                model.add(start[Op(kind, s, j + 1)] >= end[Op(kind, s, j)])
    # Precedences the memory limit forces in FIFO order (valid cuts; see the function).
    if fifo and problem.uniform_microbatches:  # derived from one m_b per stage
        for before_op, f_op in memory_precedences(problem, scaled):
            model.add(start[f_op] >= end[before_op])
    # The first op of each rank starts as early as list scheduling would start it.
    for r, stages in enumerate(problem.rank_to_stages):
        model.add(start[Op("F", min(stages), 0)] == first[r])


def _memory(model: cp_model.CpModel, problem: Problem, scaled: Scaled,
            start: dict[Op, cp_model.IntVar], end: _Ends, tight: bool) -> None:
    """Memory: F holds m_b from its start; B gives back m_b - m_w at its end, W the rest
    (a reservoir per rank with a limit)."""
    for r, stages in enumerate(problem.rank_to_stages):
        limit = scaled.limit[r]
        if limit is None:
            continue
        if tight and all(w <= b for s in stages
                         for w, b in zip(scaled.m_w_mb[s], scaled.m_b_mb[s], strict=True)):
            continue  # the order literals' rule at each F is exact: peaks are at Fs
        times, changes = [], []
        for s in stages:
            for j in range(problem.num_microbatches):
                times += [start[Op("F", s, j)], end[Op("B", s, j)], end[Op("W", s, j)]]
                m_b, m_w = scaled.m_b_mb[s][j], scaled.m_w_mb[s][j]
                changes += [m_b, m_w - m_b, -m_w]
        model.add_reservoir_constraint(times, changes, 0, limit)


def _objective(model: cp_model.CpModel, problem: Problem, scaled: Scaled, end: _Ends,
               first: list[int], upper_ticks: int, objective: str, fifo: bool,
               bound_cut: bool) -> cp_model.IntVar:
    """Objective: the goal variable, at least each rank's span (or the makespan), and
    optionally at least the proven lower bound. Returns it (not yet minimised)."""
    S, m = problem.num_stages, problem.num_microbatches
    rank_of = problem.stage_to_rank
    goal = model.new_int_var(0, upper_ticks, objective)
    last_ops = [Op("W", s, j) for s in range(S) for j in (range(m) if not fifo else [m - 1])]
    for op in last_ops:
        offset = first[rank_of[op.stage]] if objective == "cost" else 0
        model.add(goal >= end[op] - offset)
    # A valid cut: no schedule beats the proven lower bound (in ticks, rounded down and
    # widened by the scaling tolerance).
    if bound_cut:
        floor = lower_bound(problem) * (1 - scaled.time_tolerance) * scaled.time_scale
        model.add(goal >= math.floor(floor + 1e-6))
    return goal


def _hints(model: cp_model.CpModel, start: dict[Op, cp_model.IntVar],
           hint_ticks: dict[Op, int], goal: cp_model.IntVar, upper_ticks: int) -> None:
    """Hints: the hint's start of every op, and its objective."""
    for op, var in start.items():
        model.add_hint(var, hint_ticks[op])
    model.add_hint(goal, upper_ticks)


class _Progress(cp_model.CpSolverSolutionCallback):
    """Records (seconds, objective, bound) at each solution, in profile time units.

    The objective is the solution's order re-timed by the simulator (the model's value
    is in rounded ticks and may differ from what the schedule will show); the bound is
    the model's, widened by the scaling tolerance.
    """

    def __init__(self, problem: Problem, built: Model, objective: str, began: float,
                 on_progress: ProgressFn | None) -> None:
        super().__init__()
        self.problem, self.built, self.objective = problem, built, objective
        self.began, self.on_progress = began, on_progress
        self.trace: list[Progress] = []
        self.best_value = math.inf
        self.best_orders: Orders | None = None
        self.lock = threading.Lock()

    def on_solution_callback(self) -> None:
        starts = {op: float(self.value(var)) for op, var in self.built.start.items()}
        orders = orders_from_starts(self.problem, starts)
        sim = simulate(self.problem, orders)
        if not sim.ok or sim.metrics is None:
            return  # cannot happen for a solution of an exact model; never report it
        with self.lock:  # workers may report concurrently; keep the trace monotone
            best = sim.metrics.objective(self.objective)
            better = best < self.best_value
            if better:
                # The model ranks solutions by rounded ticks; the simulator may rank two
                # of them the other way, so the best re-timed one is kept here.
                self.best_value, self.best_orders = best, orders
        if better:  # for a checkpoint of the best so far (the service's jobs)
            improvements.improved(self.problem, orders, best)
        with self.lock:
            if self.trace:
                best = min(best, self.trace[-1][1])
            point = (time.perf_counter() - self.began, best,
                     self.built.scaled.bound_in_time_units(self.best_objective_bound))
            if self.trace and point[1:] == self.trace[-1][1:]:
                return  # a solution no better by the simulator: nothing new to show
        with self.lock:
            self.trace.append(point)
        if self.on_progress is not None:
            self.on_progress(point)


def _solver(time_limit_s: float, workers: int, seed: int | None,
            deterministic_s: float | None) -> cp_model.CpSolver:
    """A CP-SAT solver limited by wall time (infinite: none), by deterministic time when
    given, or both (`solver.exact.work_limit.set_limits`)."""
    solver = cp_model.CpSolver()
    set_limits(solver.parameters, wall_s=time_limit_s, work=deterministic_s, workers=workers)
    if seed is not None:
        solver.parameters.random_seed = seed
    # The reservoirs stay constraints on start times, propagated as they are, rather than
    # expanded into ordering literals (a quadratic number per rank); the hint and the
    # lower-bound cut then do the work. A design choice, not backed by a committed
    # benchmark comparing the two formulations.
    solver.parameters.expand_reservoir_constraints = False
    return solver


def solve_cpsat(problem: Problem, hint: Orders, *, objective: str = "cost",
                time_limit_s: float | None = None, workers: int = 2, fifo: bool = True,
                on_progress: ProgressFn | None = None, tight: bool | None = None,
                seed: int | None = None, deterministic_s: float | None = None,
                ) -> ExactResult:
    """Refine `hint` with CP-SAT within the time limit; never worse than the hint.

    Args:
        problem: the resolved profile.
        hint: a valid schedule (e.g. the heuristic's) that seeds and floors the search.
        objective: ``cost`` or ``makespan``.
        time_limit_s: wall-clock limit of the search; None: 10 s, or none under
            `deterministic_s` (`solver.exact.work_limit.wall_limit`).
        workers: CP-SAT search workers (threads).
        fifo: restrict to microbatch order per op kind (the paper's formulation).
        on_progress: called with (seconds, objective, bound) when either improves.
        tight: add the order literals of `solver.cpsat_tight` (one chunk per rank) or
            `solver.cpsat_shared` (several); None (default) adds them where they apply
            (`applies`: memory below 1F1B's).
        seed: CP-SAT's random seed.
        deterministic_s: stop after this much of CP-SAT's deterministic time (the work
            limit of `solver.exact.work_limit`: with `time_limit_s` infinite, a run repeats
            exactly on any load, with any number of workers).
    """
    began = time.perf_counter()
    time_limit_s = wall_limit(time_limit_s, deterministic_s)
    infeasible = infeasible_result(problem, "cpsat", began)
    if infeasible is not None:
        return infeasible
    scaled, hint, hint_ticks, upper = seed_model(problem, hint, objective)
    if tight is None:
        tight = applies(problem)
    built = build_model(problem, scaled, hint_ticks, upper, objective, fifo, tight=tight)
    solver = _solver(time_limit_s - (time.perf_counter() - began), workers, seed,
                     deterministic_s)
    callback = _Progress(problem, built, objective, began, on_progress)
    status = solver.solve(built.model, callback)
    log.info("cp-sat %s in %.2f s: objective %s bound %s", solver.status_name(status),
             solver.wall_time, solver.objective_value, solver.best_objective_bound)
    candidate = None
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        starts = {op: float(solver.value(var)) for op, var in built.start.items()}
        candidate = callback.best_orders or orders_from_starts(problem, starts)
        bound_ticks = solver.best_objective_bound
    else:
        bound_ticks = 0.0
    # The model's optimum is the problem's only when the scaling is exact.
    return finish(problem, "cpsat", objective, hint, candidate,
                  scaled.bound_in_time_units(bound_ticks),
                  proven=status == cp_model.OPTIMAL and scaled.exact,
                  began=began, progress=callback.trace, tolerance=scaled.time_tolerance,
                  scope=scope_of(fifo, objective), work=solver.deterministic_time)


# Where memory binds, the deadline probes (`solver.deadline_probes.rise_to_optimum`) come
# first: a brief probe takes BRIEF_PROBE of the budget, a long one LONG_PROBE of what is
# left, and the plain and order-literal phases share what the probes leave. Measured with
# deterministic time 10 (one worker, seed 0): refuted caps take under 0.1 of it but one,
# and the probe that settles the optimum 3.0-3.6 (gpt1.5b-p8-m24 and gpt6.2b-p8-m24 at
# limit 6); with a fixed half for the probes, the minimising phases missed it where the
# probes prove nothing (hetero-p8-m32 at 0.375p: 3919.1 instead of 3886.2).
BRIEF_PROBE = 0.1
LONG_PROBE = 0.8
# The phases in order, each with its share of the time the ones before it left.
PHASES = (("probes", 1.0), ("plain", 0.5), ("literals", 1.0))
# Workers of a deadline probe under a work limit. Measured on gpt1.5b-p8-m24 at limit 6
# (--layouts 1, CLI): one worker proved 1527.3 at --work-limit 8 (6.6 of it used), where two
# interleaved workers probing kept the heuristic's 1895.4 at 10 and reached 1560.4 at 30.
PROBE_WORKERS_UNDER_WORK = 1
# Below this budget (wall seconds, or deterministic time under a work limit) the phases
# are not worth splitting it: the whole model runs alone.
MIN_PHASED = 2.0


def solve_cpsat_rising(problem: Problem, hint: Orders, *, objective: str = "cost",
                       time_limit_s: float | None = None, workers: int = 2, fifo: bool = True,
                       on_progress: ProgressFn | None = None, seed: int | None = None,
                       deterministic_s: float | None = None) -> ExactResult:
    """The order-literal model probed with caps on its objective rising from the general
    lower bound (`solver.deadline_probes`): each refuted cap is a bound over the model's
    scope, and the first cap not refuted is searched from close above the optimum.

    A brief probe takes `BRIEF_PROBE` of the budget, a long one `LONG_PROBE` of what is
    left (see `rise_to_optimum` for when). The result is never worse than the hint.
    """
    return _rise(problem, hint, objective, wall_limit(time_limit_s, deterministic_s), workers,
                 fifo, on_progress, seed, deterministic_s, brief_share=BRIEF_PROBE)[0]


def _rise(problem: Problem, hint: Orders, objective: str, time_limit_s: float, workers: int,
          fifo: bool, on_progress: ProgressFn | None, seed: int | None,
          deterministic_s: float | None, brief_share: float) -> tuple[ExactResult, float]:
    """`solve_cpsat_rising`, each brief probe limited to `brief_share` of the budget; also
    returns the deterministic time the probes used."""
    began = time.perf_counter()
    scaled, hint, hint_ticks, upper = seed_model(problem, hint, objective)
    floor = lower_bound(problem) * (1 - scaled.time_tolerance) * scaled.time_scale
    hint_sim = simulate(problem, hint)
    assert hint_sim.metrics is not None, "the hint must be valid"
    best_value, best_orders = hint_sim.metrics.objective(objective), None
    proven_ticks = math.floor(floor + 1e-6)
    spent = 0.0  # deterministic time the probes used so far
    progress: list[Progress] = []

    def report(point: Progress) -> None:
        point = (point[0], min(point[1], best_value),
                 max(point[2], scaled.bound_in_time_units(proven_ticks)))
        if progress and point[1:] == progress[-1][1:]:
            return
        progress.append(point)
        if on_progress is not None:
            on_progress(point)

    def probe(cap: int, long: bool) -> Answer:
        nonlocal best_value, best_orders, spent
        # A brief probe: its share of the budget; a long one: its share of what is left.
        wall_left = time_limit_s - (time.perf_counter() - began)
        det_left = None if deterministic_s is None else deterministic_s - spent
        if long:
            wall_left *= LONG_PROBE
            det_left = None if det_left is None else det_left * LONG_PROBE
        else:
            wall_left = min(wall_left, time_limit_s * brief_share)
            det_left = None if det_left is None or deterministic_s is None else \
                min(det_left, deterministic_s * brief_share)
        if wall_left < 0.05 or (det_left is not None and det_left < MIN_WORK):
            return Answer("unknown")
        built = build_model(problem, scaled, hint_ticks, cap, objective, fifo, tight=True)
        built.model.clear_hints()  # the hint is above the cap: no use as a hint
        # Under a work limit a probe runs one worker: several would have to interleave
        # (`solver.exact.work_limit`), sharing the budget with neighbourhood searches that
        # have no schedule to start from below the cap (`PROBE_WORKERS_UNDER_WORK`).
        solver = _solver(wall_left, workers if det_left is None else PROBE_WORKERS_UNDER_WORK,
                         seed, det_left)
        callback = _Progress(problem, built, objective, began, report)
        status = solver.solve(built.model, callback)
        spent += solver.deterministic_time
        log.info("probe cap %d: %s in %.2f s (%.2f det)", cap, solver.status_name(status),
                 solver.wall_time, solver.deterministic_time)
        if callback.best_orders is not None and callback.best_value < best_value:
            best_value, best_orders = callback.best_value, callback.best_orders
        if status == cp_model.INFEASIBLE:
            return Answer("refuted")
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return Answer("unknown")
        value = round(solver.objective_value)
        bound = math.ceil(solver.best_objective_bound - 1e-6)
        return Answer("optimal" if status == cp_model.OPTIMAL else "found", value, bound)

    def raised(lower: int) -> None:
        nonlocal proven_ticks
        proven_ticks = lower
        report((time.perf_counter() - began, best_value, scaled.bound_in_time_units(lower)))

    bracket = rise_to_optimum(probe, proven_ticks, upper, raised)
    log.info("deadline probes: %d, bracket [%d, %d] ticks", bracket.probes, bracket.lower,
             bracket.upper)
    return finish(problem, "cpsat", objective, hint, best_orders,
                  scaled.bound_in_time_units(bracket.lower),
                  proven=bracket.proven and scaled.exact, began=began, progress=progress,
                  tolerance=scaled.time_tolerance, scope=scope_of(fifo, objective),
                  work=spent), spent


def solve_cpsat_phased(problem: Problem, hint: Orders, *, objective: str = "cost",
                       time_limit_s: float | None = None, workers: int = 2, fifo: bool = True,
                       on_progress: ProgressFn | None = None, seed: int | None = None,
                       deterministic_s: float | None = None) -> ExactResult:
    """Where memory binds below 1F1B's (`applies`): deadline probes first (`PHASES`,
    `solve_cpsat_rising`), then from their best the plain model for half the time left,
    then the order-literal model for the rest.

    Measured on gpt1.5b-p8-m24 at limit 6: the probes prove the FIFO optimum 1527.3 where
    minimising from the heuristic's 1895.4 did not in 30 s on a loaded machine; where they
    stop short, the plain model finds good orders fast but its bound stays at the general
    one, and the order-literal model raises the bound but searches worse from a poor order.
    All bound the same scope, so the best bound is kept; the result is never worse than
    the hint. Elsewhere, or under a budget too small to split (`MIN_PHASED`), `solve_cpsat`
    alone. With `deterministic_s` the phases split it (and `time_limit_s` too, where
    finite), each phase its share of what the ones before it left.
    """
    time_limit_s = wall_limit(time_limit_s, deterministic_s)
    total = time_limit_s if deterministic_s is None else deterministic_s
    if not applies(problem) or total < MIN_PHASED or not problem.uniform_microbatches:
        return solve_cpsat(problem, hint, objective=objective, time_limit_s=time_limit_s,
                           workers=workers, fifo=fifo, on_progress=on_progress, seed=seed,
                           deterministic_s=deterministic_s)
    began = time.perf_counter()
    current, bound, progress = hint, 0.0, []
    used = 0.0  # deterministic time the phases used so far, as the budget counts it
    work = 0.0  # and as CP-SAT counted it (a solve stopped at its limit may pass it a little)
    result: ExactResult | None = None
    for phase, share in PHASES:
        offset = time.perf_counter() - began
        # Each phase its share of what is left (the last one all of it).
        wall = max(0.5, (time_limit_s - offset) * share)
        det = None if deterministic_s is None else (deterministic_s - used) * share

        def shifted(point: Progress, offset: float = offset, floor: float = bound) -> None:
            if on_progress is not None:
                on_progress((point[0] + offset, point[1], max(point[2], floor)))

        if phase == "probes":
            # A brief probe: BRIEF_PROBE of the whole budget, whatever this phase's share.
            budget = max(1e-9, wall if det is None else det)
            result, spent = _rise(problem, current, objective, wall, workers, fifo, shifted,
                                  seed, det, brief_share=min(1.0, BRIEF_PROBE * total / budget))
        else:
            result = solve_cpsat(problem, current, objective=objective, time_limit_s=wall,
                                 workers=workers, fifo=fifo, on_progress=shifted, seed=seed,
                                 tight=phase == "literals", deterministic_s=det)
            # The phase's allowance: it used all of it unless it proved the optimum (and
            # then no phase follows).
            spent = det or 0.0
        used += spent
        work += result.work or 0.0
        progress += [(t + offset, value, max(b, bound)) for t, value, b in result.progress]
        bound = max(bound, result.bound)
        if result.orders is None or result.status == "optimal":
            break
        current = result.orders
    assert result is not None
    tolerance = seed_model(problem, hint, objective)[0].time_tolerance
    return finish(problem, "cpsat", objective, split_fused(hint), result.orders, bound,
                  proven=result.status == "optimal", began=began, progress=progress,
                  tolerance=tolerance, scope=scope_of(fifo, objective), work=work)
