"""The simulator: times any per-rank order under the cost model (DESIGN.md section 3).

It is the only source of figures in ppsched (STYLE.md, choice 3). `simulate` never raises
on a bad schedule: it collects every violation (unknown or misplaced ops, duplicates,
missing ops, deadlocks, memory over the limit) so that `validate` can show them all at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from solver.errors import ScheduleInvalid, Violation
from solver.ops import KINDS, Op
from solver.profile import Problem

Order = Sequence[Sequence[Op]]

# Memory tolerance: limits and m_b are floats; sums of them drift in the last bits.
_MEMORY_EPS = 1e-9


@dataclass(frozen=True)
class Metrics:
    """The figures of a timed schedule (DESIGN.md section 3)."""

    cost: float
    makespan: float
    bubble_rate: float
    peak_memory: tuple[float, ...]
    lower_bound: float
    span: tuple[float, ...]
    busy: tuple[float, ...]
    idle_fraction: tuple[float, ...]  # per rank: idle share of its own span

    def objective(self, name: str) -> float:
        """The value of objective ``cost`` (largest span) or ``makespan``."""
        return self.makespan if name == "makespan" else self.cost


@dataclass
class Simulation:
    """What the simulator found: times (where an op could be timed), memory, violations."""

    order: list[list[Op]]
    start: list[list[float | None]]
    end: list[list[float | None]]
    memory_peak: tuple[float, ...]
    violations: list[Violation] = field(default_factory=list)
    metrics: Metrics | None = None

    @property
    def ok(self) -> bool:
        return not self.violations


def duration(problem: Problem, op: Op) -> float:
    """Time of one op under the profile."""
    s = op.stage
    if op.kind == "F":
        return problem.t_f[s]
    if op.kind == "B":
        return problem.t_b[s]
    if op.kind == "W":
        return problem.t_w[s]
    return problem.t_b[s] + problem.t_w[s]


def memory_delta(problem: Problem, op: Op) -> float:
    """Activation memory an op adds (negative: frees) on its rank."""
    s = op.stage
    if op.kind == "F":
        return problem.m_b[s]
    if op.kind == "B":
        return problem.m_w[s] - problem.m_b[s]
    if op.kind == "W":
        return -problem.m_w[s]
    return -problem.m_b[s]


def simulate(problem: Problem, order: Order) -> Simulation:
    """Time `order` (one op list per rank) and check it; never raises on a bad schedule.

    Args:
        problem: the resolved profile.
        order: for each rank, its ops in execution order.

    Returns:
        A Simulation whose ``metrics`` is set when every op was timed and nothing is
        violated (memory over the limit still gets metrics, flagged as a violation).
    """
    ranks = [list(ops) for ops in order]
    violations: list[Violation] = []
    if len(ranks) != problem.num_ranks:
        violations.append(Violation("wrong_rank", f"the schedule has {len(ranks)} ranks; "
                                    f"the profile has num_ranks = {problem.num_ranks}"))
        ranks = (ranks + [[] for _ in range(problem.num_ranks)])[: problem.num_ranks]
    position, skip = _check_ops(problem, ranks, violations)
    _check_complete(problem, position, violations)
    start, end, stuck = _time(problem, ranks, position, skip)
    violations.extend(_deadlocks(ranks, position, stuck))
    peak = _check_memory(problem, ranks, skip, violations)
    sim = Simulation(ranks, start, end, peak, violations)
    if not stuck and not any(v.kind != "memory" for v in violations):
        sim.metrics = _metrics(problem, ranks, start, end, peak)
    return sim


def validate(problem: Problem, order: Order) -> Simulation:
    """Simulate `order` and raise if it breaks the contract.

    Raises:
        ScheduleInvalid: carrying every violation and the order grid marking them.
    """
    sim = simulate(problem, order)
    if sim.violations:
        from solver.render.grid import order_grid  # render imports this module

        raise ScheduleInvalid(sim.violations, order_grid(sim.order, sim.violations))
    return sim


def dependency(problem: Problem, op: Op, backward: dict[tuple[int, int], Op] | None = None,
               ) -> Op | None:
    """The op `op` waits for (besides its rank's previous op), or None.

    `F(s, j)` waits for `F(s-1, j)`; `B`/`BW(s, j)` for the backward of `(s+1, j)`, or
    `F(s, j)` on the last stage; `W(s, j)` for `B(s, j)`. `backward` maps ``(stage,
    microbatch)`` to the op doing that backward (``B`` or ``BW``), where it is known.
    """
    kind, s, j = op
    if kind == "F":
        return Op("F", s - 1, j) if s > 0 else None
    if kind == "W":
        return Op("B", s, j)
    if s == problem.num_stages - 1:
        return Op("F", s, j)
    if backward is not None and (s + 1, j) in backward:
        return backward[(s + 1, j)]
    return Op("B", s + 1, j)


def _check_ops(problem: Problem, ranks: list[list[Op]], violations: list[Violation],
               ) -> tuple[dict[Op, tuple[int, int]], set[tuple[int, int]]]:
    """Unknown, misplaced and duplicate ops; returns op positions and positions to skip."""
    position: dict[Op, tuple[int, int]] = {}
    skip: set[tuple[int, int]] = set()
    for r, ops in enumerate(ranks):
        for i, op in enumerate(ops):
            kind, s, j = op
            if kind not in KINDS or not 0 <= s < problem.num_stages \
                    or not 0 <= j < problem.num_microbatches:
                violations.append(Violation(
                    "unknown_op", f"{op} at rank {r} position {i} is not an op of this "
                    f"profile (kinds {'/'.join(KINDS)}, stages 0..{problem.num_stages - 1}, "
                    f"microbatches 0..{problem.num_microbatches - 1})", r, i))
                skip.add((r, i))
            elif problem.stage_to_rank[s] != r:
                violations.append(Violation(
                    "wrong_rank", f"{op} at rank {r} position {i}: stage {s} runs on rank "
                    f"{problem.stage_to_rank[s]} ({problem.placement} placement)", r, i))
                skip.add((r, i))
            elif op in position:
                r0, i0 = position[op]
                violations.append(Violation(
                    "duplicate", f"{op} appears twice: rank {r0} position {i0} and rank {r} "
                    f"position {i}", r, i))
                skip.add((r, i))
            else:
                position[Op(kind, s, j)] = (r, i)
    return position, skip


def _check_complete(problem: Problem, position: dict[Op, tuple[int, int]],
                    violations: list[Violation]) -> None:
    """Each (stage, microbatch) needs one F and either B and W, or BW."""
    for s in range(problem.num_stages):
        for j in range(problem.num_microbatches):
            has = {k: Op(k, s, j) in position for k in KINDS}  # type: ignore[arg-type]
            missing = [k for k in ("F",) if not has[k]]
            if has["BW"] and (has["B"] or has["W"]):
                where = position[Op("BW", s, j)]
                violations.append(Violation(
                    "mixed_backward", f"stage {s} microbatch {j} has both BW and a split "
                    "B/W; use BW alone or B and W", *where))
            elif not has["BW"]:
                missing += [k for k in ("B", "W") if not has[k]]
            for k in missing:
                violations.append(Violation(
                    "missing", f"{Op(k, s, j)} (rank {problem.stage_to_rank[s]}) is missing "  # type: ignore[arg-type]
                    "from the schedule", problem.stage_to_rank[s]))


def _time(problem: Problem, ranks: list[list[Op]], position: dict[Op, tuple[int, int]],
          skip: set[tuple[int, int]],
          ) -> tuple[list[list[float | None]], list[list[float | None]],
                     dict[int, tuple[int, Op]]]:
    """List scheduling: each op starts when its rank is free and its input has arrived.

    Ranks advance independently; a rank blocked on an op not yet timed waits in that op's
    waiter list and is woken when it is timed, so the work is linear in the number of ops.
    Returns start and end times (None where never timed) and, for each rank left blocked,
    the position of its first untimed op and the op that one waits for.
    """
    backward = {(op.stage, op.microbatch): op for op in position if op.kind in ("B", "BW")}
    start: list[list[float | None]] = [[None] * len(ops) for ops in ranks]
    end: list[list[float | None]] = [[None] * len(ops) for ops in ranks]
    end_of: dict[Op, float] = {}
    waiters: dict[Op, list[int]] = {}
    pointer = [0] * len(ranks)
    free_at = [0.0] * len(ranks)
    ready = list(range(len(ranks)))
    stuck: dict[int, tuple[int, Op]] = {}
    while ready:
        r = ready.pop()
        ops = ranks[r]
        i = pointer[r]
        t = free_at[r]
        while i < len(ops):
            if (r, i) in skip:
                i += 1
                continue
            op = ops[i]
            dep = dependency(problem, op, backward)
            begin = t
            if dep is not None:
                dep_end = end_of.get(dep)
                if dep_end is None:
                    waiters.setdefault(dep, []).append(r)
                    break
                arrive = dep_end + problem.comm(dep.stage, op.stage)
                if arrive > begin:
                    begin = arrive
            t = begin + duration(problem, op)
            start[r][i] = begin
            end[r][i] = t
            end_of[op] = t
            woken = waiters.pop(op, None)
            if woken:
                ready.extend(woken)
            i += 1
        pointer[r] = i
        free_at[r] = t
    for r, ops in enumerate(ranks):
        i = pointer[r]
        while i < len(ops) and (r, i) in skip:
            i += 1
        if i < len(ops):
            dep = dependency(problem, ops[i], backward)
            assert dep is not None  # an op without a dependency never blocks
            stuck[r] = (i, dep)
    return start, end, stuck


def _deadlocks(ranks: list[list[Op]], position: dict[Op, tuple[int, int]],
               stuck: dict[int, tuple[int, Op]]) -> list[Violation]:
    """Name the cycles among blocked ranks: each head waits for an op behind another head."""
    found: list[Violation] = []
    seen: set[int] = set()
    for first in stuck:
        path: list[int] = []
        r: int | None = first
        while r is not None and r in stuck and r not in seen and r not in path:
            path.append(r)
            where = position.get(stuck[r][1])
            r = where[0] if where else None  # a missing op is reported as missing
        if r is not None and r in path:
            for q in path[path.index(r):]:
                head, dep = stuck[q]
                dep_rank, dep_pos = position[dep]
                blocker = ranks[dep_rank][stuck[dep_rank][0]]
                found.append(Violation(
                    "deadlock", f"deadlock: {ranks[q][head]} (rank {q} position {head}) waits "
                    f"for {dep} (rank {dep_rank} position {dep_pos}), which is queued behind "
                    f"{blocker} (rank {dep_rank} position {stuck[dep_rank][0]})", q, head))
        seen.update(path)
    return found


def _check_memory(problem: Problem, ranks: list[list[Op]], skip: set[tuple[int, int]],
                  violations: list[Violation]) -> tuple[float, ...]:
    """Peak of each rank's memory prefix sums; flags the first op over the limit."""
    peaks = []
    for r, ops in enumerate(ranks):
        held = peak = 0.0
        limit = problem.memory_limit[r]
        flagged = False
        for i, op in enumerate(ops):
            if (r, i) in skip:
                continue
            held += memory_delta(problem, op)
            if held > peak:
                peak = held
            if held > limit + _MEMORY_EPS and not flagged:
                flagged = True
                violations.append(Violation(
                    "memory", f"rank {r} holds {held:g} > memory_limit {limit:g} after {op} "
                    f"(position {i})", r, i))
        peaks.append(peak)
    return tuple(peaks)


def _metrics(problem: Problem, ranks: list[list[Op]], start: list[list[float | None]],
             end: list[list[float | None]], peak: tuple[float, ...]) -> Metrics:
    spans, busy = [], []
    first, last = float("inf"), float("-inf")
    for r, ops in enumerate(ranks):
        if not ops:
            spans.append(0.0)
            busy.append(0.0)
            continue
        s0, e1 = start[r][0], end[r][-1]
        assert s0 is not None and e1 is not None
        spans.append(e1 - s0)
        busy.append(sum(duration(problem, op) for op in ops))
        first, last = min(first, s0), max(last, e1)
    cost = max(spans)
    makespan = last - first if ranks else 0.0
    bubble = (cost - max(busy)) / cost if cost > 0 else 0.0
    idle = tuple((sp - b) / sp if sp > 0 else 0.0 for sp, b in zip(spans, busy, strict=True))
    return Metrics(cost, makespan, bubble, peak, problem.simple_lower_bound, tuple(spans),
                   tuple(busy), idle)
