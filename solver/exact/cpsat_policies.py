"""The exact model with activation policies (DESIGN.md 6.3) on OR-Tools CP-SAT.

Per (stage, microbatch) two Booleans choose the policy (neither: keep; ``recompute``;
``offload``). ``R`` is an optional interval on the rank's compute lane; ``O`` and ``L``
are optional intervals on the copy lanes, each lane (per rank, or per `shared_host_link`
group) a no-overlap resource. Device memory is a reservoir whose changes are active only
under the policy that makes them; host memory another. The objective is the cost (or
makespan); the heuristic's schedule hints the search and floors the answer.

What the model leaves to the simulator: in a schedule a copy is issued from the rank's
list, so the order read off the model's starts (`orders_from_solution`) is re-timed by
`solver.simulator.simulate`, and a solution whose re-timing does not validate is not
taken (`solver.exact.finish` keeps the hint unless beaten). The model's bound holds over
every FIFO schedule (F, B, W in microbatch order per stage) whatever the copies' list
places, since any such schedule's timing is a solution of the model.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model
from ppsched.solver.exact import improvements
from ppsched.solver.exact.frame import (
    ExactResult,
    Orders,
    Progress,
    ProgressFn,
    Scaled,
    finish,
    first_start_ticks,
    scale,
    scope_of,
    split_fused,
)
from ppsched.solver.exact.work_limit import set_limits, wall_limit
from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.ops import Kind, Op, lane_of
from ppsched.solver.model.policy_fields import policy_fields
from ppsched.solver.model.problem import Problem
from ppsched.solver.sim.simulator import simulate

log = logging.getLogger(__name__)

_COMPUTE: tuple[Kind, ...] = ("F", "B", "W")
_F_ONLY: tuple[Kind, ...] = ("F",)
_POLICY: tuple[Kind, ...] = ("R", "O", "L")
_ALL: tuple[Kind, ...] = (*_COMPUTE, *_POLICY)


@dataclass(frozen=True)
class PolicyTicks:
    """The policy fields in the model's integers, and whether they scaled exactly."""

    r: tuple[int, ...]
    offload: tuple[int, ...]
    reload: tuple[int, ...]
    m_ckpt: tuple[int, ...]
    m_keep: tuple[int, ...]
    host_limit: tuple[int | None, ...]
    exact: bool


def policy_ticks(problem: Problem, scaled: Scaled) -> PolicyTicks:
    """The policy fields at `scaled`'s scales: times rounded (at least a tick), memory
    rounded so that no model solution breaks a real limit (allocations up, limits down)."""
    def whole(x: float, factor: int) -> bool:
        return abs(x * factor - round(x * factor)) <= 1e-9 * max(1.0, abs(x * factor))

    pf = policy_fields(problem)
    times = (*pf.t_r, *pf.t_offload, *pf.t_reload)
    memory = (*pf.m_ckpt, *pf.m_keep, *(x for x in pf.host_memory_limit if math.isfinite(x)))
    exact = all(whole(x, scaled.time_scale) for x in times) and \
        all(whole(x, scaled.memory_scale) for x in memory)
    ts, ms = scaled.time_scale, scaled.memory_scale
    return PolicyTicks(
        r=tuple(max(1, round(x * ts)) for x in pf.t_r),
        offload=tuple(max(1, round(x * ts)) for x in pf.t_offload),
        reload=tuple(max(1, round(x * ts)) for x in pf.t_reload),
        # What a policy keeps is subtracted from m_b: rounded down it over-counts.
        m_ckpt=tuple(math.floor(x * ms + 1e-9) for x in pf.m_ckpt),
        m_keep=tuple(math.floor(x * ms + 1e-9) for x in pf.m_keep),
        host_limit=tuple(None if not math.isfinite(x) else math.floor(x * ms + 1e-9)
                         for x in pf.host_memory_limit),
        exact=exact)


def lane_resources(problem: Problem) -> dict[tuple[int, int], tuple[str, str]]:
    """(rank, 0 for O / 1 for L) -> the copy lane resource it uses: shared by a
    `shared_host_link` group, else the rank's own."""
    pf = policy_fields(problem)
    group_of = {r: g for g, ranks in enumerate(pf.shared_host_link) for r in ranks}
    found = {}
    for r in range(problem.num_ranks):
        owner = f"group{group_of[r]}" if r in group_of else f"rank{r}"
        for index, kind in enumerate(("O", "L")):
            found[(r, index)] = (owner, lane_of(kind, pf.copy_lanes))
    return found


@dataclass
class PolicyModel:
    """A built model and the handles needed to read and hint it."""

    model: cp_model.CpModel
    start: dict[Op, cp_model.IntVar]
    present: dict[Op, cp_model.IntVar]  # R, O, L: whether the op exists
    objective: cp_model.IntVar


_Starts = dict[Op, cp_model.IntVar]
_Ends = dict[Op, cp_model.LinearExpr]
_Present = dict[Op, cp_model.IntVar]


def build_policy_model(problem: Problem, scaled: Scaled, ticks: PolicyTicks,
                       hint_ticks: dict[Op, int], upper_ticks: int, objective: str = "cost",
                       fifo: bool = True) -> PolicyModel:
    """The CP-SAT model of `problem` with a policy per activation."""
    model = cp_model.CpModel()
    first = first_start_ticks(problem, scaled)
    present = _policies(model, problem)
    start, end = _intervals(model, problem, scaled, ticks, present, first, upper_ticks,
                            objective)
    _precedences(model, problem, scaled, start, end, present, first, fifo)
    _memory(model, problem, scaled, ticks, start, end, present)
    goal = _objective(model, problem, scaled, end, first, upper_ticks, objective, fifo)
    model.minimize(goal)
    _hints(model, start, present, hint_ticks, goal, upper_ticks)
    return PolicyModel(model, start, present, goal)


def _policies(model: cp_model.CpModel, problem: Problem) -> _Present:
    """Policies: per (stage, microbatch) whether its R exists (recompute) and whether its
    O and L do (offload, one literal for both); at most one of the two."""
    pf = policy_fields(problem)
    present: _Present = {}
    for s in range(problem.num_stages):
        for j in range(problem.num_microbatches):
            if pf.can_recompute:
                present[Op("R", s, j)] = model.new_bool_var(f"recompute_{s}_{j}")
            if pf.can_offload:
                off = model.new_bool_var(f"offload_{s}_{j}")
                present[Op("O", s, j)] = off
                present[Op("L", s, j)] = off
            if pf.can_recompute and pf.can_offload:
                model.add(present[Op("R", s, j)] + present[Op("O", s, j)] <= 1)
    return present


def _intervals(model: cp_model.CpModel, problem: Problem, scaled: Scaled,
               ticks: PolicyTicks, present: _Present, first: list[int], upper_ticks: int,
               objective: str) -> tuple[_Starts, _Ends]:
    """Intervals: every compute op on its rank's lane, each R too (optional), each O and L
    (optional) on its copy lane; no overlap per lane."""
    rank_of = problem.stage_to_rank
    window = [(f, f + upper_ticks) if objective == "cost" else (0, upper_ticks)
              for f in first]
    duration = {"F": scaled.f, "B": scaled.b, "W": scaled.w, "R": ticks.r,
                "O": ticks.offload, "L": ticks.reload}
    lanes = lane_resources(problem)
    start: _Starts = {}
    end: _Ends = {}
    compute: list[list[cp_model.IntervalVar]] = [[] for _ in range(problem.num_ranks)]
    copies: dict[tuple[str, str], list[cp_model.IntervalVar]] = {}
    for s in range(problem.num_stages):
        lo, hi = window[rank_of[s]]
        for j in range(problem.num_microbatches):
            for kind in _ALL:
                op = Op(kind, s, j)
                if kind not in _COMPUTE and op not in present:
                    continue
                d = duration[kind][s]
                var = model.new_int_var(lo, max(lo, hi - d), f"start_{kind}_{s}_{j}")
                start[op], end[op] = var, var + d
                name = f"{kind}_{s}_{j}"
                interval = (model.new_fixed_size_interval_var(var, d, name)
                            if kind in _COMPUTE else
                            model.new_optional_fixed_size_interval_var(var, d, present[op], name))
                if kind in ("O", "L"):
                    copies.setdefault(lanes[(rank_of[s], kind == "L")], []).append(interval)
                else:
                    compute[rank_of[s]].append(interval)
    for intervals in (*compute, *copies.values()):
        model.add_no_overlap(intervals)
    return start, end


def _precedences(model: cp_model.CpModel, problem: Problem, scaled: Scaled, start: _Starts,
                 end: _Ends, present: _Present, first: list[int], fifo: bool) -> None:
    """Precedences (DESIGN.md sections 3 and 6.3), with the latency across ranks; the
    microbatch orders; each rank's first start."""
    S, m = problem.num_stages, problem.num_microbatches
    for s in range(S):
        for j in range(m):
            F, B, W = (Op(k, s, j) for k in _COMPUTE)
            if s > 0:
                model.add(start[F] >= end[Op("F", s - 1, j)] + scaled.comm[s - 1])
            if s < S - 1:
                model.add(start[B] >= end[Op("B", s + 1, j)] + scaled.comm[s])
            else:
                model.add(start[B] >= end[F])
            model.add(start[W] >= end[B])
            _policy_precedences(model, start, end, present, s, j)
    for kind in _COMPUTE if fifo else _F_ONLY:
        for s in range(S):
            for j in range(m - 1):
                model.add(start[Op(kind, s, j + 1)] >= end[Op(kind, s, j)])
    for r, stages in enumerate(problem.rank_to_stages):
        model.add(start[Op("F", min(stages), 0)] == first[r])


def _policy_precedences(model: cp_model.CpModel, start: _Starts, end: _Ends,
                        present: _Present, s: int, j: int) -> None:
    """An R between its F and B; an O after its F, its L after the O and before the B;
    each only when present."""
    F, B = Op("F", s, j), Op("B", s, j)
    R, OUT, IN = (Op(k, s, j) for k in _POLICY)
    if R in present:
        model.add(start[R] >= end[F]).only_enforce_if(present[R])
        model.add(start[B] >= end[R]).only_enforce_if(present[R])
    if OUT in present:
        model.add(start[OUT] >= end[F]).only_enforce_if(present[OUT])
        model.add(start[IN] >= end[OUT]).only_enforce_if(present[OUT])
        model.add(start[B] >= end[IN]).only_enforce_if(present[OUT])


@dataclass
class _Reservoir:
    """A reservoir's changes: when, by how much, and under which literal."""

    times: list[cp_model.LinearExprT] = field(default_factory=list)
    changes: list[int] = field(default_factory=list)
    actives: list[cp_model.LiteralT] = field(default_factory=list)

    def add(self, at: cp_model.LinearExprT, change: int, active: cp_model.LiteralT) -> None:
        if change:
            self.times.append(at)
            self.changes.append(change)
            self.actives.append(active)


def _memory(model: cp_model.CpModel, problem: Problem, scaled: Scaled, ticks: PolicyTicks,
            start: _Starts, end: _Ends, present: _Present) -> None:
    """Memory: increases at a start, decreases at an end (DESIGN.md 6.3); a reservoir per
    rank for its device, another for its host."""
    true = model.new_bool_var("always")
    model.add(true == 1)
    for r, stages in enumerate(problem.rank_to_stages):
        device, host = _Reservoir(), _Reservoir()
        for s in stages:
            for j in range(problem.num_microbatches):
                _changes(model, scaled, ticks, start, end, present, true, s, j, device, host)
        limit = scaled.limit[r]
        if limit is not None:
            model.add_reservoir_constraint_with_active(device.times, device.changes,
                                                       device.actives, 0, limit)
        host_limit = ticks.host_limit[r]
        if host_limit is not None and host.times:
            model.add_reservoir_constraint_with_active(host.times, host.changes,
                                                       host.actives, 0, host_limit)


def _changes(model: cp_model.CpModel, scaled: Scaled, ticks: PolicyTicks, start: _Starts,
             end: _Ends, present: _Present, true: cp_model.IntVar, s: int, j: int,
             device: _Reservoir, host: _Reservoir) -> None:
    """The memory changes of (stage s, microbatch j), each under its policy's literal."""
    m_b, m_w = scaled.m_b[s], scaled.m_w[s]
    F, B, W = (Op(k, s, j) for k in _COMPUTE)
    R, OUT, IN = (Op(k, s, j) for k in _POLICY)
    if R in present:
        # An explicit literal: CP-SAT 9.15 mis-checks negated reservoir literals.
        held = model.new_bool_var(f"held_{s}_{j}")
        model.add(held + present[R] == 1)
        device.add(start[F], m_b, held)
        device.add(start[F], ticks.m_ckpt[s], present[R])
        device.add(start[R], m_b - ticks.m_ckpt[s], present[R])
    else:
        device.add(start[F], m_b, true)
    if OUT in present:
        moved = m_b - ticks.m_keep[s]
        device.add(end[OUT], -moved, present[OUT])
        device.add(start[IN], moved, present[OUT])
        host.times += [start[OUT], end[IN]]
        host.changes += [moved, -moved]
        host.actives += [present[OUT], present[OUT]]
    device.add(start[B] if m_w > m_b else end[B], m_w - m_b, true)
    device.add(end[W], -m_w, true)


def _objective(model: cp_model.CpModel, problem: Problem, scaled: Scaled, end: _Ends,
               first: list[int], upper_ticks: int, objective: str,
               fifo: bool) -> cp_model.IntVar:
    """Objective: the goal variable, at least each rank's span (or the makespan) and the
    general bound with policies. Returns it (not yet minimised)."""
    m = problem.num_microbatches
    rank_of = problem.stage_to_rank
    goal = model.new_int_var(0, upper_ticks, objective)
    for s in range(problem.num_stages):
        for j in range(m) if not fifo else [m - 1]:
            offset = first[rank_of[s]] if objective == "cost" else 0
            model.add(goal >= end[Op("W", s, j)] - offset)
    # A valid cut: no schedule beats the general bound with policies.
    floor = lower_bound(problem) * (1 - scaled.time_tolerance) * scaled.time_scale
    model.add(goal >= math.floor(floor + 1e-6))
    return goal


def _hints(model: cp_model.CpModel, start: _Starts, present: _Present,
           hint_ticks: dict[Op, int], goal: cp_model.IntVar, upper_ticks: int) -> None:
    """Hints: the hint's starts and policies (an op it lacks is absent), its objective."""
    for op, var in start.items():
        if op in hint_ticks:
            model.add_hint(var, hint_ticks[op])
    for op, literal in present.items():
        if op.kind != "L":  # an L shares its O's literal
            model.add_hint(literal, op in hint_ticks)
    model.add_hint(goal, upper_ticks)


def orders_from_solution(problem: Problem, start_of: dict[Op, float], late: bool = False,
                         ) -> Orders:
    """Per-rank lists from the model's starts (present ops only).

    Compute ops in start order (ties: F, R, B, W); each O right after its F; each L right
    after the last compute op of its rank that starts no later than the L (a copy is
    issued when the rank's program reaches it), after its own F, in start order; with
    `late`, before the first compute op that starts at or after it instead (the L then
    starts no earlier than in the model: less memory, maybe a later B).
    """
    tie = {"F": 0, "R": 1, "B": 2, "W": 3}
    orders: Orders = []
    for r in range(problem.num_ranks):
        mine = [op for op in start_of if problem.stage_to_rank[op.stage] == r]
        compute = sorted((op for op in mine if op.kind in tie),
                         key=lambda op: (start_of[op], tie[op.kind], op.microbatch))
        reloads = sorted((op for op in mine if op.kind == "L"), key=lambda op: start_of[op])
        after: dict[int, list[Op]] = {}
        position = {op: i for i, op in enumerate(compute)}
        for op in reloads:
            f_at = position[Op("F", op.stage, op.microbatch)]
            at = f_at
            for i in range(f_at + 1, len(compute)):
                if start_of[compute[i]] < start_of[op] or \
                        (not late and start_of[compute[i]] == start_of[op]):
                    at = i
            after.setdefault(at, []).append(op)
        offloaded = {(op.stage, op.microbatch) for op in mine if op.kind == "O"}
        row: list[Op] = []
        for i, op in enumerate(compute):
            row.append(op)
            if op.kind == "F" and (op.stage, op.microbatch) in offloaded:
                row.append(Op("O", op.stage, op.microbatch))
            row.extend(after.get(i, ()))
        orders.append(row)
    return orders


class _Progress(cp_model.CpSolverSolutionCallback):
    """Re-times each solution with the simulator; keeps the best valid one and records
    (seconds, objective, bound) in profile time units."""

    def __init__(self, problem: Problem, built: PolicyModel, scaled: Scaled, exact: bool,
                 objective: str, began: float, on_progress: ProgressFn | None) -> None:
        super().__init__()
        self.problem, self.built, self.scaled, self.exact = problem, built, scaled, exact
        self.objective, self.began, self.on_progress = objective, began, on_progress
        self.trace: list[Progress] = []
        self.best_value = math.inf
        self.best_orders: Orders | None = None
        self.lock = threading.Lock()

    def on_solution_callback(self) -> None:
        starts = _starts(self, self.built)
        found = []
        for late in (False, True):
            orders = orders_from_solution(self.problem, starts, late)
            sim = simulate(self.problem, orders)
            if sim.ok and sim.metrics is not None:
                found.append((sim.metrics.objective(self.objective), late, orders))
        if not found:
            return  # the list places of the copies time them otherwise: not taken
        value, _, orders = min(found, key=lambda x: (x[0], x[1]))
        with self.lock:
            better = value < self.best_value
            if better:
                self.best_value, self.best_orders = value, orders
        if better:  # for a checkpoint of the best so far (the service's jobs)
            improvements.improved(self.problem, orders, value)
        with self.lock:
            bound = self.scaled.bound_in_time_units(self.best_objective_bound) \
                if self.exact else 0.0
            point = (time.perf_counter() - self.began, self.best_value, bound)
            if self.trace and point[1:] == self.trace[-1][1:]:
                return
            self.trace.append(point)
        if self.on_progress is not None:
            self.on_progress(point)


def _starts(reader: cp_model.CpSolver | cp_model.CpSolverSolutionCallback,
            built: PolicyModel) -> dict[Op, float]:
    """The start of every op present in the solution."""
    return {op: float(reader.value(var)) for op, var in built.start.items()
            if op not in built.present or reader.boolean_value(built.present[op])}


def solve_cpsat_policies(problem: Problem, hint: Orders, *, objective: str = "cost",
                         time_limit_s: float | None = None, workers: int = 2,
                         fifo: bool = True, on_progress: ProgressFn | None = None,
                         seed: int | None = None, deterministic_s: float | None = None,
                         ) -> ExactResult:
    """Refine `hint` (a valid schedule, with or without policies) with CP-SAT choosing a
    policy per activation; never worse than the hint.

    The bound is the model's (over FIFO schedules) where every time and memory figure
    scaled exactly, else the general one (`solver.bounds.lower_bound`). `time_limit_s`:
    wall seconds (None: 10, or none under `deterministic_s`, CP-SAT's deterministic time:
    see `solver.exact.work_limit`).
    """
    began = time.perf_counter()
    time_limit_s = wall_limit(time_limit_s, deterministic_s)
    scaled = scale(problem)
    ticks = policy_ticks(problem, scaled)
    hint = split_fused(hint)
    # The hint timed in ticks, every limit lifted (the hint is valid; only times matter).
    in_ticks_fields: dict[str, Any] = {
        "t_f": tuple(map(float, scaled.f)), "t_b": tuple(map(float, scaled.b)),
        "t_w": tuple(map(float, scaled.w)), "t_comm": tuple(map(float, scaled.comm)),
        "t_r": tuple(map(float, ticks.r)), "t_offload": tuple(map(float, ticks.offload)),
        "t_reload": tuple(map(float, ticks.reload)),
        "memory_limit": (math.inf,) * problem.num_ranks,
        "host_memory_limit": (math.inf,) * problem.num_ranks}
    in_ticks = dataclasses.replace(problem, **in_ticks_fields)
    timed = simulate(in_ticks, hint)
    assert timed.metrics is not None, "the hint must be a complete, deadlock-free order"
    hint_ticks = {op: round(t) for ops, times in zip(timed.order, timed.start, strict=True)
                  for op, t in zip(ops, times, strict=True) if t is not None}
    upper = round(timed.metrics.objective(objective))
    built = build_policy_model(problem, scaled, ticks, hint_ticks, upper, objective, fifo)
    solver = cp_model.CpSolver()
    set_limits(solver.parameters, wall_s=time_limit_s - (time.perf_counter() - began),
               work=deterministic_s, workers=workers)
    if seed is not None:
        solver.parameters.random_seed = seed
    exact = scaled.exact and ticks.exact
    callback = _Progress(problem, built, scaled, exact, objective, began, on_progress)
    status = solver.solve(built.model, callback)
    log.info("cp-sat (policies) %s in %.2f s: objective %s bound %s",
             solver.status_name(status), solver.wall_time, solver.objective_value,
             solver.best_objective_bound)
    candidate = None
    bound = 0.0
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        candidate = callback.best_orders or orders_from_solution(problem,
                                                                 _starts(solver, built))
        if exact:
            bound = scaled.bound_in_time_units(solver.best_objective_bound)
    # The model's optimum is the problem's only when its best solution re-timed to it.
    proven = status == cp_model.OPTIMAL and exact and callback.best_orders is not None and \
        callback.best_value <= scaled.time_units(solver.objective_value) * (
            1 + scaled.time_tolerance) + 1e-9
    return finish(problem, "cpsat", objective, hint, candidate, bound, proven=proven,
                  began=began, progress=callback.trace, tolerance=scaled.time_tolerance,
                  scope=scope_of(fifo, objective) + ", copies in any list place",
                  work=solver.deterministic_time)
