"""Exact refinement: the shared frame of the CP-SAT and MILP backends.

A backend gets a `Problem` scaled to integers (`Scaled`), a hint, a time limit, and
returns start times; this module turns those into per-rank orders, re-times them with
the simulator (the only source of figures), keeps the hint when it is not beaten, and
reports status, objective, proven bound, gap and wall time (`ExactResult`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.errors import SolverError
from ppsched.solver.model.ops import Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.schedule import Status
from ppsched.solver.sim.simulator import simulate

Orders = list[list[Op]]
# (seconds since start, best objective so far, best bound so far), in profile time units.
Progress = tuple[float, float, float]
ProgressFn = Callable[[Progress], None]

# Relative error the time scaling may add to a span (see `Scaled.time_tolerance`).
TIME_TOLERANCE = 1e-4
_MAX_DECIMALS = 6
_MAX_SCALE = 10**12  # ticks per time unit; beyond, the tolerance is stated as it is


@dataclass(frozen=True)
class Scaled:
    """A problem's times and memory as integers, and how exact that is.

    Attributes:
        time_scale: integer ticks per profile time unit.
        time_tolerance: bound on the relative error of any span from rounding times
            (0 when every time is a whole number of ticks).
        f, b, w: op durations in ticks per stage (at least 1 tick, so starts on a rank
            are distinct and the order is read off the start times).
        comm: latency in ticks per stage boundary (s, s+1), 0 on the same rank.
        memory_scale: integer units per profile memory unit.
        m_b, m_w, limit: memory in those units (exact, or rounded so that no model
            solution breaks the real limit: allocations up, limits down).
        memory_exact: whether memory scaled exactly; if not, the model is stricter than
            the problem, so its bound and its optimality prove nothing.
    """

    time_scale: int
    time_tolerance: float
    f: tuple[int, ...]
    b: tuple[int, ...]
    w: tuple[int, ...]
    comm: tuple[int, ...]
    memory_scale: int
    m_b: tuple[int, ...]
    m_w: tuple[int, ...]
    limit: tuple[int | None, ...]
    memory_exact: bool = True
    # DESIGN.md 6.2: per microbatch, [stage][microbatch] (rows repeat the per-stage
    # values when the microbatches are alike). The per-stage tuples above are then
    # representative values; only models that read these matrices take unequal ones.
    f_mb: tuple[tuple[int, ...], ...] = ()
    b_mb: tuple[tuple[int, ...], ...] = ()
    w_mb: tuple[tuple[int, ...], ...] = ()
    comm_mb: tuple[tuple[int, ...], ...] = ()
    m_b_mb: tuple[tuple[int, ...], ...] = ()
    m_w_mb: tuple[tuple[int, ...], ...] = ()

    @property
    def exact(self) -> bool:
        """The model is the problem itself: its optimum and bound hold for the problem."""
        return self.time_tolerance == 0.0 and self.memory_exact

    def bound_in_time_units(self, bound_ticks: float) -> float:
        """A model bound as a bound on the problem: widened by the time tolerance, and
        worthless (0) when memory was rounded, since the model is then stricter."""
        if not self.memory_exact:
            return 0.0
        return self.time_units(bound_ticks) * (1 - self.time_tolerance)

    def ticks(self, time_units: float) -> int:
        return round(time_units * self.time_scale)

    def time_units(self, ticks: float) -> float:
        return ticks / self.time_scale


def scale(problem: Problem) -> Scaled:
    """Scale a problem to integers: exactly when its numbers have few decimals.

    Times: the smallest power of ten (up to 10^6) that makes every time a whole number;
    otherwise a power of ten that keeps the rounding small. Either way an op of zero time
    becomes one tick (so starts on a rank are distinct). The error on any span is at most
    half a tick per rounded op or latency and one tick per zero-time op along a path of
    the precedence graph, and a path visits each op and boundary at most once: the scale
    grows until that error is within `TIME_TOLERANCE` of the lower bound, and the
    tolerance left is stated (0 when the scaling is exact). Memory: exact when possible,
    else rounded so that no model solution breaks the real limit.
    """
    m = problem.num_microbatches
    uniform = problem.uniform_microbatches
    if uniform:
        times = [*problem.t_f, *problem.t_b, *problem.t_w, *problem.t_comm]
        num_zero = m * sum(1 for t in (*problem.t_f, *problem.t_b, *problem.t_w) if t == 0)
    else:  # DESIGN.md 6.2: every microbatch's own values
        op_times = [x for matrix in (problem.t_f_mb, problem.t_b_mb, problem.t_w_mb)
                    for row in matrix for x in row]
        times = op_times + [x for row in problem.t_comm_mb for x in row]
        num_zero = sum(1 for t in op_times if t == 0)
    num_ops = 3 * problem.num_stages * m
    exact_scale = decimal_scale(times)
    # Error in ticks along the longest possible path: ops and latencies rounded by at
    # most half a tick each (none when exact), zero-time ops stretched by a tick.
    num_latencies = 2 * (problem.num_stages - 1) * m  # F down and B up, per boundary
    error_ticks = num_zero + (0.0 if exact_scale else 0.5 * (num_ops + num_latencies))
    floor = max(problem.simple_lower_bound, 1e-12)
    time_scale = exact_scale or 1
    while error_ticks / (time_scale * floor) > TIME_TOLERANCE and time_scale < _MAX_SCALE:
        time_scale *= 10
    tolerance = error_ticks / (time_scale * floor)
    comm = tuple(0 if problem.stage_to_rank[s] == problem.stage_to_rank[s + 1]
                 else round(problem.t_comm[s] * time_scale)
                 for s in range(problem.num_stages - 1))
    limits = [x for x in problem.memory_limit if math.isfinite(x)]
    if uniform:
        memory = [*problem.m_b, *problem.m_w, *limits]
    else:  # the per-stage means are representative only: no model reads them as memory
        memory = [x for matrix in (problem.m_b_mb, problem.m_w_mb) for row in matrix
                  for x in row] + limits
    exact_memory_scale = decimal_scale(memory)
    memory_scale = exact_memory_scale or 10 ** _MAX_DECIMALS
    exact_memory = exact_memory_scale is not None
    rounding_up = round if exact_memory else math.ceil

    def op_ticks(matrix: tuple[tuple[float, ...], ...]) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(max(1, round(x * time_scale)) for x in row) for row in matrix)

    def memory_units(matrix: tuple[tuple[float, ...], ...]) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(int(rounding_up(x * memory_scale)) for x in row) for row in matrix)

    return Scaled(
        time_scale=time_scale, time_tolerance=tolerance,
        f=tuple(max(1, round(x * time_scale)) for x in problem.t_f),
        b=tuple(max(1, round(x * time_scale)) for x in problem.t_b),
        w=tuple(max(1, round(x * time_scale)) for x in problem.t_w),
        comm=comm, memory_scale=memory_scale,
        m_b=tuple(int(rounding_up(x * memory_scale)) for x in problem.m_b),
        # m_w is held from B to W: rounded up, it only over-counts. It may exceed m_b
        # (DESIGN.md section 6.1), so it is not capped by it.
        m_w=tuple(int(rounding_up(x * memory_scale)) for x in problem.m_w),
        limit=tuple(None if not math.isfinite(x) else int(
            round(x * memory_scale) if exact_memory else math.floor(x * memory_scale))
            for x in problem.memory_limit),
        memory_exact=exact_memory,
        f_mb=op_ticks(problem.t_f_mb), b_mb=op_ticks(problem.t_b_mb),
        w_mb=op_ticks(problem.t_w_mb),
        comm_mb=tuple(tuple(0 if problem.stage_to_rank[s] == problem.stage_to_rank[s + 1]
                            else round(x * time_scale) for x in row)
                      for s, row in enumerate(problem.t_comm_mb)),
        m_b_mb=memory_units(problem.m_b_mb), m_w_mb=memory_units(problem.m_w_mb),
    )


def decimal_scale(values: Sequence[float]) -> int | None:
    """The smallest 10^k (k <= 6) making every value whole, or None."""
    for k in range(_MAX_DECIMALS + 1):
        factor = 10 ** k
        if all(abs(x * factor - round(x * factor)) <= 1e-9 * max(1.0, abs(x * factor))
               for x in values):
            return factor
    return None


def hint_timing(problem: Problem, scaled: Scaled, orders: Orders) -> tuple[dict[Op, int],
                                                                           int, int]:
    """List-schedule `orders` in ticks: start of each op, the cost and the makespan.

    The simulator does the timing, on the problem with its times replaced by the scaled
    integer ones (sums of whole numbers stay exact in floats).
    """
    in_ticks = dataclasses.replace(
        problem, t_f=tuple(map(float, scaled.f)), t_b=tuple(map(float, scaled.b)),
        t_w=tuple(map(float, scaled.w)), t_comm=tuple(map(float, scaled.comm)))
    if not problem.uniform_microbatches:  # each microbatch its own ticks (6.2)

        def floats(matrix: tuple[tuple[int, ...], ...]) -> tuple[tuple[float, ...], ...]:
            return tuple(tuple(map(float, row)) for row in matrix)

        in_ticks = dataclasses.replace(
            in_ticks, _t_f_mb=floats(scaled.f_mb), _t_b_mb=floats(scaled.b_mb),
            _t_w_mb=floats(scaled.w_mb), _t_comm_mb=floats(scaled.comm_mb))
    sim = simulate(in_ticks, orders)
    assert sim.metrics is not None, "the hint must be a complete, deadlock-free order"
    start = {op: round(t) for ops, times in zip(sim.order, sim.start, strict=True)
             for op, t in zip(ops, times, strict=True) if t is not None}
    return start, round(sim.metrics.cost), round(sim.metrics.makespan)


def seed(problem: Problem, hint: Orders, objective: str,
         ) -> tuple[Scaled, Orders, dict[Op, int], int]:
    """What every backend starts from: the scaled problem, the hint with fused BWs split,
    the hint's start of each op in ticks, and its objective in ticks (an upper bound)."""
    scaled = scale(problem)
    hint = split_fused(hint)
    hint_ticks, cost, makespan = hint_timing(problem, scaled, hint)
    return scaled, hint, hint_ticks, cost if objective == "cost" else makespan


def first_start_ticks(problem: Problem, scaled: Scaled) -> list[int]:
    """Per rank, when its first op starts in any order with Fs in microbatch order.

    The first op of a rank is F(s0, 0), s0 its lowest stage; it has no predecessor on its
    rank, so list scheduling starts it as soon as microbatch 0 arrives: the sum of the
    F times and latencies of the stages before s0 (ranks hold their stages' F(., 0) first
    for the same reason). A model must fix this start: letting it slide later would
    shorten the span it optimises below what the simulator measures.
    """
    arrival = [0] * problem.num_stages
    for s in range(1, problem.num_stages):
        arrival[s] = arrival[s - 1] + scaled.f_mb[s - 1][0] + scaled.comm_mb[s - 1][0]
    return [arrival[min(stages)] for stages in problem.rank_to_stages]


def split_fused(orders: Orders) -> Orders:
    """The same orders with each fused BW written as B then W (the exact models split it;
    the timing of the order is unchanged)."""
    return [[x for op in ops for x in ((op._replace(kind="B"), op._replace(kind="W"))
                                       if op.kind == "BW" else (op,))] for ops in orders]


def orders_from_starts(problem: Problem, start_of: dict[Op, float]) -> Orders:
    """Per-rank orders: each rank's ops sorted by start time (ties: F, B, W order)."""
    kind_rank = {"F": 0, "B": 1, "W": 2, "BW": 1}
    orders: Orders = [[] for _ in range(problem.num_ranks)]
    for op in start_of:
        orders[problem.stage_to_rank[op.stage]].append(op)
    for ops in orders:
        ops.sort(key=lambda op: (start_of[op], kind_rank[op.kind], op.microbatch))
    return orders


@dataclass
class ExactResult:
    """What an exact backend found, with every figure re-timed by the simulator.

    Attributes:
        status: ``optimal`` (proven, within the time-scaling tolerance), ``feasible``
            (better than the hint, not proven), ``heuristic`` (nothing better than the
            hint in time), ``infeasible`` (no schedule fits the memory limit), or
            ``timeout`` (no schedule at all in time).
        orders: the best per-rank orders (None when infeasible or timed out).
        objective: their simulated objective (cost or makespan).
        bound: the best proven lower bound on the objective (profile time units).
        wall_s: seconds spent.
        min_feasible_limit: when infeasible, the smallest memory limit per rank that
            admits a schedule.
        progress: (seconds, best objective, bound) each time either improved.
        backend: ``cpsat`` or ``milp``.
        scope: the schedules `bound` (and an ``optimal`` status) hold over, in words
            (see `scope_of`): the exact models search a restricted family, so their
            bound is not the profile's `metrics.lower_bound` (DESIGN.md section 3).
        work: CP-SAT's deterministic time, summed over the solves the result took
            (`solver.exact.work_limit`); None for a backend that is not CP-SAT.
    """

    status: Status
    orders: Orders | None
    objective: float | None
    bound: float
    wall_s: float
    backend: str
    min_feasible_limit: tuple[float, ...] | None = None
    progress: list[Progress] = field(default_factory=list)
    scope: str = ""
    work: float | None = None

    @property
    def gap(self) -> float:
        if self.objective is None or self.objective <= 0:
            return 0.0
        return max(0.0, (self.objective - self.bound) / self.objective)


# The scopes a bound may hold over (`ExactResult.scope`, the schedule's `solver.bound_scope`).
SCOPE_ALL = "all schedules"
SCOPE_FIFO = "FIFO orders (F, B and W each in microbatch order per stage)"
SCOPE_F_ORDER = "forwards in microbatch order per stage"


def scope_of(fifo: bool, objective: str) -> str:
    """The scope of an exact model's bound: its order family and objective."""
    return f"{SCOPE_FIFO if fifo else SCOPE_F_ORDER}, objective {objective}"


def checked_bound(bound: float, best: float, tolerance: float) -> float:
    """`bound` clamped to `best` when it exceeds it by no more than the scaling tolerance.

    A bound above a schedule's re-timed objective by more than the tolerance the time
    scaling states (plus float noise) is wrong, not rounding: hiding it by the clamp
    would print a false proof of optimality.

    Raises:
        SolverError: the bound exceeds `best` beyond the tolerance.
    """
    if bound <= best:
        return bound
    if bound <= best * (1 + tolerance) + 1e-9 * max(1.0, abs(best)):
        return best
    raise SolverError(f"the solver's bound {bound:.6g} exceeds the re-timed objective "
                      f"{best:.6g} of a valid schedule by {(bound - best) / best:.3%}, beyond "
                      f"the time-scaling tolerance {tolerance:.3g}: a model or scaling bug")


def infeasible_result(problem: Problem, backend: str, began: float) -> ExactResult | None:
    """The `infeasible` result when the limit is below what one microbatch needs."""
    need = problem.min_memory_per_rank
    if all(limit >= x - 1e-9 for limit, x in zip(problem.memory_limit, need, strict=True)):
        return None
    return ExactResult("infeasible", None, None, math.inf, time.perf_counter() - began,
                       backend, min_feasible_limit=need)


def finish(problem: Problem, backend: str, objective: str, hint: Orders,
           candidate: Orders | None, solver_bound: float, proven: bool, began: float,
           progress: list[Progress], *, tolerance: float = 0.0,
           scope: str = "", work: float | None = None) -> ExactResult:
    """Re-time the backend's answer, keep the hint unless beaten, and set the status.

    Args:
        candidate: the backend's best orders, or None if it found none.
        solver_bound: the backend's proven bound over `scope`, in profile time units.
        proven: the backend proved its answer optimal (over `scope`).
        tolerance: the relative error the time scaling may add (`Scaled.time_tolerance`).
        scope: the family of schedules the backend searched (`scope_of`).
        work: the CP-SAT deterministic time the backend spent (`ExactResult.work`).

    Raises:
        SolverError: the bound exceeds the best re-timed objective beyond `tolerance`.
    """
    hint_sim = simulate(problem, hint)
    assert hint_sim.ok and hint_sim.metrics is not None, "the hint must be valid"
    best_orders, best = hint, hint_sim.metrics.objective(objective)
    improved = False
    if candidate is not None:
        sim = simulate(problem, candidate)
        if sim.ok and sim.metrics is not None and \
                sim.metrics.objective(objective) < best - 1e-9:
            best_orders, best = candidate, sim.metrics.objective(objective)
            improved = True
    # The general bound holds over every schedule (cost, hence makespan too): when it
    # meets the best, the best is optimal over all schedules, whatever the model's scope.
    general = checked_bound(lower_bound(problem), best, tolerance)
    bound = max(general, checked_bound(solver_bound, best, tolerance))
    status: Status
    if best - general <= 1e-9 * max(1.0, best):
        status, scope = "optimal", SCOPE_ALL
    elif proven or best - bound <= 1e-9 * max(1.0, best):
        status = "optimal"
    else:
        status = "feasible" if improved else "heuristic"
    return ExactResult(status, best_orders, best, bound, time.perf_counter() - began,
                       backend, progress=progress, scope=scope, work=work)


def proven_by_bound(problem: Problem, hint: Orders, objective: str, backend: str,
                    began: float) -> ExactResult | None:
    """The ``optimal`` result at once when the general bound already meets the hint.

    Then no model can improve it, and running one to its time limit only wastes time
    (issue 11: 64.8 s at p=32, m=256, 1p, where the bound equals the heuristic's cost).
    """
    sim = simulate(problem, hint)
    assert sim.ok and sim.metrics is not None, "the hint must be valid"
    best = sim.metrics.objective(objective)
    general = checked_bound(lower_bound(problem), best, 0.0)
    if best - general > 1e-9 * max(1.0, best):
        return None
    return ExactResult("optimal", hint, best, general, time.perf_counter() - began, backend,
                       progress=[(time.perf_counter() - began, best, general)],
                       scope=SCOPE_ALL)
