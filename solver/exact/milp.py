"""The Zero Bubble paper's ILP (section 3.2) on PuLP: end times, big-M ordering binaries.

One binary per pair of ops on a rank that the dependency graph leaves unordered, memory
counted through them: O(n^2) binaries per rank, so this backend is for small instances
(over `MAX_OPS` ops are refused: use CP-SAT) and for checking `solver.cpsat`. Build and
solve are kept apart (`build_milp`, `solve_milp`); figures come from the simulator.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import re
import tempfile
import time
import warnings
from dataclasses import dataclass

# OR-Tools before PuLP: PuLP imports highspy when it is installed, and highspy and the
# HiGHS inside OR-Tools 9.15 cannot both load in one process. In this order PuLP only
# finds its HiGHS unavailable; in the other, CP-SAT fails to import.
import ortools.sat.python.cp_model  # noqa: F401
import pulp
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
    seed,
)
from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.errors import ProfileError, SolverError
from ppsched.solver.model.ops import Kind, Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.sim.simulator import simulate

log = logging.getLogger(__name__)

KINDS: tuple[Kind, ...] = ("F", "B", "W")
F_ONLY: tuple[Kind, ...] = ("F",)
# The most ops the MILP takes on (p*v*m*3). At 600 (p = 4, m = 50) it already has 14,700
# binaries with FIFO and 29,400 without. CBC stalls long before: on p = 4, m = 8 from a
# microbatch-at-a-time hint it improves nothing in 5 s; CP-SAT proves the optimum in 0.3 s.
MAX_OPS = 600
DEFAULT_SOLVER = "PULP_CBC_CMD"


@dataclass(frozen=True)
class _Edge:
    """`after` starts no earlier than `before` ends plus `lag` ticks."""

    before: Op
    after: Op
    lag: int


def build_milp(problem: Problem, scaled: Scaled, hint_ticks: dict[Op, int],
               upper_ticks: int, objective: str = "cost",
               fifo: bool = True) -> tuple[pulp.LpProblem, dict[Op, pulp.LpVariable]]:
    """The MILP of `problem` (single and multi-chunk alike: ranks are data).

    Args:
        scaled: the problem in integer ticks and memory units.
        hint_ticks: start of each op in the hint, timed in ticks (list scheduling).
        upper_ticks: the hint's objective in ticks; no better solution exceeds it.
        objective: ``cost`` (largest per-rank span) or ``makespan``.
        fifo: each op kind runs in microbatch order on each stage (the paper's ILP);
            False frees the B and W orders (F stays in order, as in the CP-SAT model).

    Returns:
        The model (objective variable named ``objective``) and each op's end variable.
    """
    graph = _graph(problem, scaled, fifo)
    first = first_start_ticks(problem, scaled)
    windows = _windows(problem, graph, first, upper_ticks, objective)
    model = pulp.LpProblem("ppsched_milp", pulp.LpMinimize)
    end, order = _variables(model, problem, graph, windows)
    _precedences(model, problem, graph, end, first)
    _ordering(model, graph, windows, end, order)
    _memory(model, problem, scaled, graph, order)
    goal = _objective(model, problem, scaled, graph, windows, end, upper_ticks)
    _hints(graph, windows, end, order, goal, hint_ticks, upper_ticks)
    return model, end


@dataclass(frozen=True)
class _Graph:
    """The dependency graph of the F, B and W ops, and their durations in ticks."""

    edges: _Edges
    ops: list[Op]  # predecessors first
    after: dict[Op, set[Op]]  # every op the graph forces after each op
    # Per (stage, microbatch) values (DESIGN.md 6.2): rows repeat when microbatches are
    # alike, so one model serves equal and unequal microbatches.
    duration: dict[str, tuple[tuple[int, ...], ...]]
    rank_of: tuple[int, ...]

    def d(self, op: Op) -> int:
        return self.duration[op.kind][op.stage][op.microbatch]

    def rank_ops(self, num_ranks: int) -> list[list[Op]]:
        """Each rank's ops, in the graph's order."""
        found: list[list[Op]] = [[] for _ in range(num_ranks)]
        for op in self.ops:
            found[self.rank_of[op.stage]].append(op)
        return found


def _graph(problem: Problem, scaled: Scaled, fifo: bool) -> _Graph:
    edges = _edges(problem, scaled, fifo)
    ops = _topological(problem, edges)
    return _Graph(edges, ops, _closure(ops, edges),
                  {"F": scaled.f_mb, "B": scaled.b_mb, "W": scaled.w_mb},
                  tuple(problem.stage_to_rank))


@dataclass(frozen=True)
class _Windows:
    """Each op's earliest end (`lo`) and latest end (`hi`), and each rank's origin of the
    span (its first start for the cost, 0 for the makespan)."""

    lo: dict[Op, int]
    hi: dict[Op, int]
    offset: list[int]


def _windows(problem: Problem, graph: _Graph, first: list[int], upper_ticks: int,
             objective: str) -> _Windows:
    """Windows: the earliest end from the precedences (heads), the latest end from the
    hint (every op of rank r ends by first[r] + upper for the cost, by upper for the
    makespan) pulled back along the precedences. They also give each big-M its least
    valid value, at most the hint's objective plus the largest first start."""
    ops, edges, d = graph.ops, graph.edges, graph.d
    offset = [f if objective == "cost" else 0 for f in first]
    lo = {op: 0 for op in ops}
    for r, stages in enumerate(problem.rank_to_stages):
        lo[Op("F", min(stages), 0)] = first[r]
    for op in ops:  # topological: every predecessor's head is final
        lo[op] += d(op)
        for edge in edges.succ[op]:
            lo[edge.after] = max(lo[edge.after], lo[op] + edge.lag)
    hi = {op: offset[graph.rank_of[op.stage]] + upper_ticks for op in ops}
    for op in reversed(ops):
        for edge in edges.succ[op]:
            hi[op] = min(hi[op], hi[edge.after] - d(edge.after) - edge.lag)
    return _Windows(lo, hi, offset)


_Order = dict[tuple[Op, Op], pulp.LpVariable]


def _variables(model: pulp.LpProblem, problem: Problem, graph: _Graph, windows: _Windows,
               ) -> tuple[dict[Op, pulp.LpVariable], _Order]:
    """Variables: each op's end within its window; order[(a, b)] = 1 when a runs before b,
    for a pair on one rank that the graph leaves unordered (the pair's other direction is
    1 - order[(a, b)]: O_ab + O_ba = 1)."""
    lo, hi, after = windows.lo, windows.hi, graph.after
    end = {op: _variable(model, f"E_{_name(op)}", lo[op], max(lo[op], hi[op]))
           for op in graph.ops}
    order: _Order = {}
    for members in graph.rank_ops(problem.num_ranks):
        for x, a in enumerate(members):
            for b in members[x + 1:]:
                if b not in after[a] and a not in after[b]:
                    name = f"O_{_name(a)}_{_name(b)}"
                    order[(a, b)] = _variable(model, name, 0, 1, pulp.LpBinary)
    return end, order


def _precedences(model: pulp.LpProblem, problem: Problem, graph: _Graph,
                 end: dict[Op, pulp.LpVariable], first: list[int]) -> None:
    """Precedences (DESIGN.md section 3), with the latency across ranks (0 on one rank),
    and each rank's first start."""
    d = graph.d
    for op in graph.ops:
        for edge in graph.edges.succ[op]:
            model += end[edge.after] >= end[op] + d(edge.after) + edge.lag, \
                f"prec_{_name(op)}_{_name(edge.after)}"
    # The first op of each rank starts as early as list scheduling would start it, so
    # the model's span is the simulator's for the same order (see `first_start_ticks`).
    for r, stages in enumerate(problem.rank_to_stages):
        head = Op("F", min(stages), 0)
        model += end[head] == first[r] + d(head), f"first_{r}"


def _ordering(model: pulp.LpProblem, graph: _Graph, windows: _Windows,
              end: dict[Op, pulp.LpVariable], order: _Order) -> None:
    """Ordering: one op at a time per rank. M is the least value that leaves the
    constraint slack whenever the pair runs the other way (from the windows)."""
    lo, hi, d = windows.lo, windows.hi, graph.d
    for (a, b), var in order.items():
        big_ab = hi[a] + d(b) - lo[b]
        big_ba = hi[b] + d(a) - lo[a]
        model += end[b] >= end[a] + d(b) - big_ab * (1 - var), f"ord_{_name(a)}_{_name(b)}"
        model += end[a] >= end[b] + d(a) - big_ba * var, f"ord_{_name(b)}_{_name(a)}"


def _before(graph: _Graph, order: _Order, a: Op, b: Op) -> pulp.LpAffineExpression | int:
    """1 when a runs before b on their rank (a constant if the graph decides it)."""
    if b in graph.after[a]:
        return 1
    if a in graph.after[b]:
        return 0
    if (a, b) in order:
        return order[(a, b)]
    return 1 - order[(b, a)]


def _memory(model: pulp.LpProblem, problem: Problem, scaled: Scaled, graph: _Graph,
            order: _Order) -> None:
    """Memory: an F raises what a rank holds, and so does a B whose m_w exceeds its m_b
    (DESIGN.md section 6.1). Just after such an op, the rank holds its own change plus
    the change of every op that ran before it: +m_b for F, m_w - m_b for B, -m_w for W
    (ops on a rank never overlap, so "ran before" is the order)."""
    change = {"F": scaled.m_b_mb,
              "B": tuple(tuple(w - b for w, b in zip(ws, bs, strict=True))
                         for ws, bs in zip(scaled.m_w_mb, scaled.m_b_mb, strict=True)),
              "W": tuple(tuple(-w for w in ws) for ws in scaled.m_w_mb)}
    for r, members in enumerate(graph.rank_ops(problem.num_ranks)):
        limit = scaled.limit[r]
        if limit is None:
            continue
        for op in members:
            own = change[op.kind][op.stage][op.microbatch]
            if own <= 0:
                continue
            held = pulp.lpSum(change[other.kind][other.stage][other.microbatch]
                              * _before(graph, order, other, op)
                              for other in members if other != op)
            model += own + held <= limit, f"mem_{_name(op)}"


def _objective(model: pulp.LpProblem, problem: Problem, scaled: Scaled, graph: _Graph,
               windows: _Windows, end: dict[Op, pulp.LpVariable],
               upper_ticks: int) -> pulp.LpVariable:
    """Objective: the largest span (end minus the rank's first start) or the last end.
    Only ops that no op of their rank must follow can end a rank."""
    rank_of = graph.rank_of
    goal = _variable(model, "objective", 0, upper_ticks, pulp.LpInteger)
    for op in graph.ops:
        if not any(rank_of[other.stage] == rank_of[op.stage] for other in graph.after[op]):
            model += goal >= end[op] - windows.offset[rank_of[op.stage]], f"goal_{_name(op)}"
    # A valid cut: no schedule beats the proven lower bound (in ticks, rounded down and
    # widened by the scaling tolerance). The goal is whole: durations, latencies and
    # first starts are whole ticks, so the least goal of any ordering is too.
    floor = lower_bound(problem) * (1 - scaled.time_tolerance) * scaled.time_scale
    model += goal >= math.floor(floor + 1e-6), "lower_bound"
    model += goal
    return goal


def _hints(graph: _Graph, windows: _Windows, end: dict[Op, pulp.LpVariable], order: _Order,
           goal: pulp.LpVariable, hint_ticks: dict[Op, int], upper_ticks: int) -> None:
    """Warm start: the hint's times and order, when the hint is a solution of this model.
    It may not be (Bs out of microbatch order under fifo; with unequal microbatches, an
    order the heuristic chose on mean times), and PuLP refuses an initial value outside a
    variable's bounds."""
    ops, lo, hi, d = graph.ops, windows.lo, windows.hi, graph.d
    hint_ends = {op: hint_ticks[op] + d(op) for op in ops}
    if all(lo[op] <= hint_ends[op] <= max(lo[op], hi[op]) for op in ops) and all(
            hint_ends[edge.after] >= hint_ends[op] + d(edge.after) + edge.lag
            for op in ops for edge in graph.edges.succ[op]):
        for op, var in end.items():
            var.setInitialValue(hint_ends[op])
        for (a, b), var in order.items():
            var.setInitialValue(1 if hint_ticks[a] < hint_ticks[b] else 0)
        goal.setInitialValue(upper_ticks)


class _Edges:
    """The dependency graph: the cost model's precedences and the microbatch orders."""

    def __init__(self) -> None:
        self.succ: dict[Op, list[_Edge]] = {}
        self.pred_count: dict[Op, int] = {}

    def add(self, before: Op, after: Op, lag: int) -> None:
        self.succ.setdefault(before, []).append(_Edge(before, after, lag))
        self.succ.setdefault(after, [])
        self.pred_count[after] = self.pred_count.get(after, 0) + 1
        self.pred_count.setdefault(before, 0)


def _edges(problem: Problem, scaled: Scaled, fifo: bool) -> _Edges:
    S, m = problem.num_stages, problem.num_microbatches
    edges = _Edges()
    for s in range(S):
        for j in range(m):
            if s > 0:
                edges.add(Op("F", s - 1, j), Op("F", s, j), scaled.comm_mb[s - 1][j])
            if s < S - 1:
                edges.add(Op("B", s + 1, j), Op("B", s, j), scaled.comm_mb[s][j])
            else:
                edges.add(Op("F", s, j), Op("B", s, j), 0)
            edges.add(Op("B", s, j), Op("W", s, j), 0)
    # Microbatch order per stage: F always (it fixes each rank's first op, as in the
    # CP-SAT model), B and W only in the FIFO model.
    for kind in KINDS if fifo else F_ONLY:
        for s in range(S):
            for j in range(m - 1):
                edges.add(Op(kind, s, j), Op(kind, s, j + 1), 0)
    return edges


def _topological(problem: Problem, edges: _Edges) -> list[Op]:
    """Every F, B and W op, predecessors first (Kahn's algorithm)."""
    waiting = dict(edges.pred_count)
    ready = [op for op, count in waiting.items() if count == 0]
    ops: list[Op] = []
    while ready:
        op = ready.pop()
        ops.append(op)
        for edge in edges.succ[op]:
            waiting[edge.after] -= 1
            if waiting[edge.after] == 0:
                ready.append(edge.after)
    assert len(ops) == 3 * problem.num_stages * problem.num_microbatches, "cyclic graph"
    return ops


def _closure(ops: list[Op], edges: _Edges) -> dict[Op, set[Op]]:
    """For each op, every op the graph forces after it (transitively)."""
    after: dict[Op, set[Op]] = {}
    for op in reversed(ops):
        reach: set[Op] = set()
        for edge in edges.succ[op]:
            reach.add(edge.after)
            reach |= after[edge.after]
        after[op] = reach
    return after


def _variable(model: pulp.LpProblem, name: str, low: float, up: float,
              cat: str = pulp.LpContinuous) -> pulp.LpVariable:
    """A new variable: made by the model on PuLP >= 3.3 (which deprecates the bare
    constructor), by the constructor on older PuLP (pyproject allows >= 2.8)."""
    add = getattr(model, "add_variable", None)
    return add(name, low, up, cat) if add is not None else pulp.LpVariable(name, low, up, cat)


def _name(op: Op) -> str:
    return f"{op.kind}_{op.stage}_{op.microbatch}"


def _solver(name: str | None, time_limit_s: float, log_path: str) -> pulp.LpSolver:
    """The named PuLP solver (CBC by default), or a ProfileError listing those here."""
    with warnings.catch_warnings():  # PuLP 3 deprecates its bundled CBC (still shipped)
        warnings.simplefilter("ignore", DeprecationWarning)
        if name is None or name == DEFAULT_SOLVER:
            return pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit_s, warmStart=True,
                                     logPath=log_path)
        available = pulp.listSolvers(onlyAvailable=True)
        if name not in available:
            raise ProfileError("backend", name, "one of " + ", ".join(available)
                               + " (the PuLP solvers installed here)")
        # Only solvers that declare warmStart get it: others (e.g. HiGHS through highspy)
        # would pass it on as an unknown native option.
        kind = type(pulp.getSolver(name, msg=False))
        warm = {"warmStart": True} if "warmStart" in inspect.signature(kind).parameters \
            else {}
        return pulp.getSolver(name, timeLimit=time_limit_s, msg=False, **warm)


_CBC_BOUND = re.compile(r"^Lower bound:\s*(-?[0-9.eE+-]+)", re.MULTILINE)


def _reported_bound(model: pulp.LpProblem, solver_name: str | None,
                    log_path: str) -> float | None:
    """The best bound the solver proved (PuLP does not report it), or None.

    CBC prints it in its log; HiGHS through highspy keeps it on its model.
    """
    if solver_name in (None, DEFAULT_SOLVER):
        try:
            with open(log_path) as f:
                found = _CBC_BOUND.findall(f.read())
            return float(found[-1]) if found else None
        except (OSError, ValueError) as exc:
            log.warning("could not read the bound from CBC's log %s (%s): the run "
                        "reports no bound of its own", log_path, exc)
            return None
    info = getattr(getattr(model, "solverModel", None), "getInfo", None)
    if callable(info):
        bound = getattr(info(), "mip_dual_bound", None)
        if isinstance(bound, float | int) and math.isfinite(bound):
            return float(bound)
    return None


def solve_milp(problem: Problem, hint: Orders, *, objective: str = "cost",
               time_limit_s: float = 10.0, fifo: bool = True, solver_name: str | None = None,
               on_progress: ProgressFn | None = None) -> ExactResult:
    """Refine `hint` with the MILP within the time limit; never worse than the hint.

    Args:
        problem: the resolved profile (at most `MAX_OPS` ops: use CP-SAT beyond).
        hint: a valid schedule (e.g. the heuristic's) that seeds and floors the search.
        objective: ``cost`` or ``makespan``.
        time_limit_s: wall-clock limit, model building included.
        fifo: restrict to microbatch order per op kind (the paper's formulation).
        solver_name: a PuLP solver name (``pulp.listSolvers(onlyAvailable=True)``);
            None for the bundled CBC.
        on_progress: called with (seconds, objective, bound) once the solver returns
            (PuLP's solvers report nothing while they run).

    Raises:
        ProfileError: ``backend``, when the problem is too large for the MILP or the
            solver is unknown or not installed.
        SolverError: when the solver itself fails (e.g. its executable crashes).
    """
    began = time.perf_counter()
    infeasible = infeasible_result(problem, "milp", began)
    if infeasible is not None:
        return infeasible
    num_ops = 3 * problem.num_stages * problem.num_microbatches
    if num_ops > MAX_OPS:
        raise ProfileError("backend", "milp", f"'cpsat' for this problem: the MILP takes at "
                           f"most {MAX_OPS} ops (p*v*m*3) and this one has {num_ops}")
    scaled, hint, hint_ticks, upper = seed(problem, hint, objective)
    model, end = build_milp(problem, scaled, hint_ticks, upper, objective, fifo)
    hint_sim = simulate(problem, hint)
    assert hint_sim.metrics is not None, "the hint must be valid"
    seed_value = hint_sim.metrics.objective(objective)
    limit_s = max(0.05, time_limit_s - (time.perf_counter() - began))
    fd, log_path = tempfile.mkstemp(prefix="ppsched_cbc_", suffix=".log")
    os.close(fd)
    try:
        solver = _solver(solver_name, limit_s, log_path)
        solving = time.perf_counter()
        try:
            model.solve(solver)
        except pulp.PulpSolverError as exc:  # the solver crashed: not the user's input
            raise SolverError(f"the MILP solver {solver.name} failed: {exc}") from exc
        solve_s = time.perf_counter() - solving
        reported = _reported_bound(model, solver_name, log_path)
    finally:
        os.unlink(log_path)
    sol_status = model.sol_status
    found = sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible) and \
        all(var.value() is not None for var in end.values())
    # CBC says "Optimal" only when it closed the search; other solvers may call a
    # timed-out incumbent optimal, so a run that used up its time proves nothing.
    optimal = sol_status == pulp.LpSolutionOptimal and found and solve_s < 0.99 * limit_s
    log.info("milp %s (%s) in %.2f s: objective %s", pulp.LpStatus[model.status],
             pulp.LpSolution.get(sol_status, sol_status), solve_s, pulp.value(model.objective))
    candidate = None
    bound_ticks = 0.0
    progress: list[Progress] = []
    if found:
        duration = {"F": scaled.f_mb, "B": scaled.b_mb, "W": scaled.w_mb}
        starts = {op: float(var.value()) - duration[op.kind][op.stage][op.microbatch]
                  for op, var in end.items()}
        candidate = orders_from_starts(problem, starts)
        value = float(pulp.value(model.objective))
        bound_ticks = value if optimal else max(0.0, min(reported or 0.0, value))
        # The progress line shows the order re-timed by the simulator, never the model's
        # rounded ticks (at worst the hint's, which the result never falls behind).
        retimed = simulate(problem, candidate)
        shown = seed_value if retimed.metrics is None else min(
            seed_value, retimed.metrics.objective(objective))
        point = (time.perf_counter() - began, shown, scaled.bound_in_time_units(bound_ticks))
        progress.append(point)
        if on_progress is not None:
            on_progress(point)
    # The model's optimum is the problem's only when the scaling is exact.
    return finish(problem, "milp", objective, hint, candidate,
                  scaled.bound_in_time_units(bound_ticks),
                  proven=optimal and scaled.exact, began=began, progress=progress,
                  tolerance=scaled.time_tolerance, scope=scope_of(fifo, objective))
