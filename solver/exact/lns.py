"""Large neighbourhood search: CP-SAT re-solves one time window of a schedule at a time.

On large instances (p=32, m=256: 24,576 ops) the whole CP-SAT model finds nothing better
than its hint within a minute (issue 11). Here the order is kept everywhere but in a
window of the current best schedule: the ops that start inside `[t0, t1)` are re-ordered
by a small CP-SAT model, where everything before the window is fixed (its times are
constants: release times of the window's ops, and each rank's memory level at `t0`), and
everything after it keeps its order and is re-timed by the simulator. The model minimises
when each rank is done with its window ops (a proxy); the spliced order is kept only when
the simulator says the objective improved, so the result is never worse than the seed.

Why a splice is always a valid schedule: an op after the window can only depend on ops
that started before it, so the window's ops never wait on it; the window holds the same
ops as before, so each rank leaves it at the same memory level; and the model keeps the
memory within the limit inside the window from the level at its start.
"""

from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import dataclass

from ortools.sat.python import cp_model
from ppsched.solver.exact import improvements
from ppsched.solver.exact.frame import (
    SCOPE_ALL,
    ExactResult,
    Orders,
    Progress,
    ProgressFn,
    Scaled,
    finish,
    hint_timing,
    infeasible_result,
    scale,
    split_fused,
)
from ppsched.solver.exact.work_limit import MIN_WORK, set_limits, wall_limit
from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.ops import Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.sim.simulator import simulate

log = logging.getLogger(__name__)

# Ops re-ordered per window: enough to move a warm-up or a W fill, small enough that
# CP-SAT settles it in about a second.
WINDOW_OPS = 240
WINDOW_SECONDS = 2.0


@dataclass
class _Current:
    """The incumbent: its orders, its objective and its op starts in ticks."""

    orders: Orders
    value: float
    start: dict[Op, int]


def _predecessors(problem: Problem, scaled: Scaled, op: Op) -> list[tuple[Op, int]]:
    """The ops `op` depends on, with the latency after each (DESIGN.md section 3)."""
    s, j, last = op.stage, op.microbatch, problem.num_stages - 1
    if op.kind == "F":
        return [(Op("F", s - 1, j), scaled.comm[s - 1])] if s > 0 else []
    if op.kind == "B":
        return [(Op("B", s + 1, j), scaled.comm[s])] if s < last else [(Op("F", s, j), 0)]
    return [(Op("B", s, j), 0)]


def _duration(scaled: Scaled, op: Op) -> int:
    return {"F": scaled.f, "B": scaled.b, "W": scaled.w}[op.kind][op.stage]


def _memory(scaled: Scaled, op: Op) -> int:
    s = op.stage
    return {"F": scaled.m_b[s], "B": scaled.m_w[s] - scaled.m_b[s], "W": -scaled.m_w[s]}[op.kind]


def reorder_window(problem: Problem, scaled: Scaled, current: _Current, t0: int, t1: int,
                   time_limit_s: float, workers: int, seed: int,
                   deterministic: bool = False) -> Orders | None:
    """The current orders with the ops starting in [t0, t1) re-ordered by CP-SAT, or None
    when the model finds no order (or nothing to re-order). `deterministic`: the time
    limit is CP-SAT's deterministic time, not wall time."""
    return _reorder_window(problem, scaled, current, t0, t1, time_limit_s, workers, seed,
                           deterministic)[0]


def _reorder_window(problem: Problem, scaled: Scaled, current: _Current, t0: int, t1: int,
                    time_limit_s: float, workers: int, seed: int, deterministic: bool,
                    ) -> tuple[Orders | None, float]:
    """`reorder_window`, and the deterministic time its CP-SAT solve took (0 if none)."""
    model = cp_model.CpModel()
    window: list[list[Op]] = []
    before: list[list[Op]] = []
    after: list[list[Op]] = []
    for ops in current.orders:
        window.append([op for op in ops if t0 <= current.start[op] < t1])
        before.append([op for op in ops if current.start[op] < t0])
        after.append([op for op in ops if current.start[op] >= t1])
    free = {op for ops in window for op in ops}
    if sum(len(ops) > 1 for ops in window) == 0:
        return None, 0.0
    horizon = max(current.start[op] + _duration(scaled, op)
                  for ops in current.orders for op in ops)
    start: dict[Op, cp_model.IntVar] = {}
    finish_r: list[cp_model.IntVar] = []
    for r, ops in enumerate(window):
        if not ops:
            continue
        ready = max((current.start[op] + _duration(scaled, op) for op in before[r]), default=0)
        intervals = []
        for op in ops:
            d = _duration(scaled, op)
            var = model.new_int_var(ready, horizon, f"s_{op}")
            start[op] = var
            intervals.append(model.new_fixed_size_interval_var(var, d, f"i_{op}"))
            model.add_hint(var, current.start[op])
        model.add_no_overlap(intervals)
        done = model.new_int_var(ready, horizon + 1, f"done_{r}")
        for op in ops:
            model.add(done >= start[op] + _duration(scaled, op))
        finish_r.append(done)
        limit = scaled.limit[r]
        if limit is not None:
            level = sum(_memory(scaled, op) for op in before[r])
            times = [start[op] + (0 if op.kind == "F" else _duration(scaled, op)) for op in ops]
            model.add_reservoir_constraint(times, [_memory(scaled, op) for op in ops],
                                           -level, limit - level)
    # In window order, not the set's: a set of ops iterates by string hashes, which
    # differ from process to process, and CP-SAT's search depends on the order of the
    # constraints, so the run would not repeat under the same deterministic time.
    for op in (op for ops in window for op in ops):
        for dep, lag in _predecessors(problem, scaled, op):
            if dep in free:
                model.add(start[op] >= start[dep] + _duration(scaled, dep) + lag)
            else:  # it ran before the window (an op after it cannot precede one inside)
                model.add(start[op] >= current.start[dep] + _duration(scaled, dep) + lag)
    model.minimize(sum(finish_r))
    solver = cp_model.CpSolver()
    set_limits(solver.parameters, wall_s=None if deterministic else time_limit_s,
               work=time_limit_s if deterministic else None, workers=workers)
    solver.parameters.random_seed = seed
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, solver.deterministic_time
    kind_rank = {"F": 0, "B": 1, "W": 2}
    orders = []
    for r in range(problem.num_ranks):
        middle = sorted(window[r], key=lambda op: (solver.value(start[op]), kind_rank[op.kind]))
        orders.append([*before[r], *middle, *after[r]])
    return orders, solver.deterministic_time


def solve_lns(problem: Problem, hint: Orders, *, objective: str = "cost",
              time_limit_s: float | None = None, workers: int = 2, seed: int = 0,
              on_progress: ProgressFn | None = None, max_windows: int | None = None,
              work_limit: float | None = None) -> ExactResult:
    """Improve `hint` window by window until the time limit; never worse than the hint.

    The bound is the general lower bound only (no window proves anything about the
    whole), so the status is ``feasible`` when a window helped, else ``heuristic``
    (``optimal`` only when the general bound meets the result). With `max_windows`, it
    stops after that many windows, each limited by CP-SAT's deterministic time instead
    of wall time; with `work_limit`, once the windows used that much deterministic time
    (each at most `WINDOW_SECONDS` of it). Either way the run repeats exactly on any
    load. `time_limit_s`: wall seconds (None: 10, or none with either of those; a wall
    limit given with them still caps).
    """
    time_limit_s = wall_limit(time_limit_s, work_limit if max_windows is None else 0.0)
    deterministic = max_windows is not None or work_limit is not None
    began = time.perf_counter()
    infeasible = infeasible_result(problem, "lns", began)
    if infeasible is not None:
        return infeasible
    scaled = scale(problem)
    rng = random.Random(seed)
    orders = split_fused(hint)
    current = _retime(problem, scaled, orders, objective)
    progress: list[Progress] = []
    general = lower_bound(problem)
    horizon = max(current.start.values())
    num_ops = sum(len(ops) for ops in orders)
    width = max(1, int(horizon * min(1.0, WINDOW_OPS / num_ops)))
    iteration = 0
    work = 0.0  # CP-SAT's deterministic time over the windows
    charged = 0.0  # what `work_limit` counts: each window at least MIN_WORK, so it ends

    def go_on() -> bool:
        if max_windows is not None and iteration >= max_windows:
            return False
        if work_limit is not None and charged > work_limit - MIN_WORK:
            return False
        return not math.isfinite(time_limit_s) or \
            time.perf_counter() - began < time_limit_s - 0.05

    while go_on():
        left = time_limit_s - (time.perf_counter() - began)
        t0 = rng.randrange(0, max(1, horizon - width // 2))
        limit = min(WINDOW_SECONDS, work_limit - charged) if work_limit is not None \
            else WINDOW_SECONDS if deterministic else min(WINDOW_SECONDS, max(0.05, left))
        candidate, spent = _reorder_window(problem, scaled, current, t0, t0 + width, limit,
                                           workers, seed + iteration, deterministic)
        iteration += 1
        work += spent
        charged += max(MIN_WORK, spent)
        if candidate is None:
            continue
        better = _retime(problem, scaled, candidate, objective)
        if better.value < current.value - 1e-9:
            current = better
            horizon = max(current.start.values())
            # No window proves anything: the bound shown is the general one.
            point = (time.perf_counter() - began, current.value, general)
            progress.append(point)
            # For a checkpoint of the best so far (the service's jobs).
            improvements.improved(problem, current.orders, current.value)
            if on_progress is not None:
                on_progress(point)
    log.info("lns: %d windows in %.1f s, objective %.4f", iteration,
             time.perf_counter() - began, current.value)
    return finish(problem, "lns", objective, orders, current.orders, 0.0, proven=False,
                  began=began, progress=progress, tolerance=scaled.time_tolerance,
                  scope=SCOPE_ALL, work=work)


def _retime(problem: Problem, scaled: Scaled, orders: Orders, objective: str) -> _Current:
    """Time `orders` in ticks (starts) and by the simulator (objective)."""
    sim = simulate(problem, orders)
    value = math.inf if sim.metrics is None or not sim.ok else sim.metrics.objective(objective)
    start = hint_timing(problem, scaled, orders)[0] if math.isfinite(value) else {}
    return _Current(orders, value, start)
