"""The simulator: times any per-rank order under the cost model (DESIGN.md section 3).

It is the only source of figures in ppsched (STYLE.md, choice 3). `simulate` never raises
on a bad schedule: it collects every violation (unknown or misplaced ops, duplicates,
missing ops, deadlocks, memory over the limit) so that `validate` can show them all at once.

An FB op (DESIGN.md 6.4) fills the slots of its two parts, an F and a BW: it starts when
both parts' dependencies are met, its end is both parts' end, and each part counts once
among all the schedule's ops.
"""

from __future__ import annotations

from collections.abc import Sequence

from ppsched.solver.model.bounds import clamped_to, general_lower_bound
from ppsched.solver.model.errors import ScheduleInvalid, Violation
from ppsched.solver.model.ops import KINDS, FBOp, Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.sim.kernel import FB as _FB
from ppsched.solver.sim.kernel import NO_OP as _NO_OP
from ppsched.solver.sim.kernel import Kernel, tables
from ppsched.solver.sim.lanes import has_policy_ops, simulate_with_lanes
from ppsched.solver.sim.result import Metrics, Simulation

Order = Sequence[Sequence[Op]]

# Memory tolerance: limits and m_b are floats; sums of them drift in the last bits.
_MEMORY_EPS = 1e-9


def duration(problem: Problem, op: Op) -> float:
    """Time of one op under the profile (its microbatch's values, DESIGN.md 6.2)."""
    if isinstance(op, FBOp):
        return problem.overlap * (problem.t_f_mb[op.stage][op.microbatch]
                                  + problem.t_b_mb[op.stage_b][op.microbatch_b]
                                  + problem.t_w_mb[op.stage_b][op.microbatch_b])
    s, j = op.stage, op.microbatch
    if op.kind == "F":
        return problem.t_f_mb[s][j]
    if op.kind == "B":
        return problem.t_b_mb[s][j]
    if op.kind == "W":
        return problem.t_w_mb[s][j]
    return problem.t_b_mb[s][j] + problem.t_w_mb[s][j]


def memory_delta(problem: Problem, op: Op) -> float:
    """Activation memory an op adds (negative: frees) on its rank."""
    if isinstance(op, FBOp):
        return problem.m_b_mb[op.stage][op.microbatch] \
            - problem.m_b_mb[op.stage_b][op.microbatch_b]
    s, j = op.stage, op.microbatch
    if op.kind == "F":
        return problem.m_b_mb[s][j]
    if op.kind == "B":
        return problem.m_w_mb[s][j] - problem.m_b_mb[s][j]
    if op.kind == "W":
        return -problem.m_w_mb[s][j]
    return -problem.m_b_mb[s][j]


def peak_memory(problem: Problem, order: Order) -> list[float]:
    """Each rank's peak activation memory along its order (no timing, no checks)."""
    peaks = []
    for ops in order:
        held = peak = 0.0
        for op in ops:
            if isinstance(op, FBOp):  # its F part holds m_b before its BW part frees
                peak = max(peak, held + problem.m_b_mb[op.stage][op.microbatch])
            held += memory_delta(problem, op)
            peak = max(peak, held)
        peaks.append(peak)
    return peaks


def simulate(problem: Problem, order: Order) -> Simulation:
    """Time `order` (one op list per rank) and check it; never raises on a bad schedule.

    Args:
        problem: the resolved profile.
        order: for each rank, its ops in execution order.

    Returns:
        A Simulation whose ``metrics`` is set when every op was timed and nothing but
        memory is violated (memory over the limit is flagged, and still timed).
    """
    ranks = [[op if isinstance(op, Op) else Op(*op) for op in ops] for ops in order]
    if has_policy_ops(ranks) and len(ranks) == problem.num_ranks:
        # Issue 12: R, O, L and copy lanes (DESIGN.md 6.3) are timed by `solver.lanes`.
        return simulate_with_lanes(problem, ranks)
    violations: list[Violation] = []
    if len(ranks) != problem.num_ranks:
        violations.append(Violation("wrong_rank", f"the schedule has {len(ranks)} ranks; "
                                    f"the profile has num_ranks = {problem.num_ranks}"))
        ranks = (ranks + [[] for _ in range(problem.num_ranks)])[: problem.num_ranks]
    ids, where, pairs = _check_ops(problem, ranks, violations)
    _check_complete(problem, where, violations)
    start, end, stuck = _time(problem, ranks, ids, where, pairs)
    violations.extend(_deadlocks(problem, ranks, where, stuck))
    peak = _check_memory(problem, ranks, ids, violations, pairs)
    sim = Simulation(ranks, start, end, peak, violations)
    if not stuck and not any(v.kind != "memory" for v in violations):
        sim.metrics = _metrics(problem, ranks, start, end, peak, bool(pairs))
    return sim


def validate(problem: Problem, order: Order) -> Simulation:
    """Simulate `order` and raise if it breaks the contract.

    Raises:
        ScheduleInvalid: carrying every violation and the order grid marking them.
    """
    sim = simulate(problem, order)
    if sim.violations:
        raise ScheduleInvalid(sim.violations, order=sim.order)
    return sim


# Ops are numbered ``(kind * num_stages + stage) * m + microbatch`` inside the simulator,
# so its hot loop works on ints and lists instead of tuples and dicts.
_KIND_INDEX = {k: i for i, k in enumerate(KINDS)}
# An FB op's id is ``4 * num_stages * m + n``: its parts' ids are ``pairs[n]``.


def _check_ops(problem: Problem, ranks: list[list[Op]], violations: list[Violation],
               ) -> tuple[list[list[int]], list[int], list[tuple[int, int]]]:
    """Unknown, misplaced and duplicate ops.

    Returns each position's op id (``_NO_OP`` where the op is skipped); per op id,
    ``rank * 2**32 + position`` of its one accepted occurrence (``_NO_OP`` if absent),
    an FB's position standing for both its parts; and the part ids of each FB.
    """
    S, m = problem.num_stages, problem.num_microbatches
    stage_to_rank = problem.stage_to_rank
    where = [_NO_OP] * (4 * S * m)
    pairs: list[tuple[int, int]] = []
    ids: list[list[int]] = []
    for r, ops in enumerate(ranks):
        row = []
        for i, op in enumerate(ops):
            if isinstance(op, FBOp):
                row.append(_check_fb(problem, op, r, i, where, pairs, violations))
                continue
            kind, s, j = op
            k = _KIND_INDEX.get(kind)
            if k is None or not (isinstance(s, int) and 0 <= s < S) \
                    or not (isinstance(j, int) and 0 <= j < m):
                violations.append(Violation(
                    "unknown_op", f"{op} at rank {r} position {i} is not an op of this "
                    f"profile (kinds {'/'.join(KINDS)}, stages 0..{S - 1}, "
                    f"microbatches 0..{m - 1})", r, i))
                row.append(_NO_OP)
                continue
            if stage_to_rank[s] != r:
                violations.append(Violation(
                    "wrong_rank", f"{op} at rank {r} position {i}: stage {s} runs on rank "
                    f"{stage_to_rank[s]} ({problem.placement} placement)", r, i))
                row.append(_NO_OP)
                continue
            x = (k * S + s) * m + j
            if where[x] != _NO_OP:
                r0, i0 = divmod(where[x], 1 << 32)
                violations.append(Violation(
                    "duplicate", f"{op} appears twice: rank {r0} position {i0} and rank {r} "
                    f"position {i}", r, i))
                row.append(_NO_OP)
                continue
            where[x] = (r << 32) + i
            row.append(x)
        ids.append(row)
    return ids, where, pairs


def _check_fb(problem: Problem, op: FBOp, r: int, i: int, where: list[int],
              pairs: list[tuple[int, int]], violations: list[Violation]) -> int:
    """Check an FB's two parts as `_check_ops` checks plain ops; its id, or ``_NO_OP``."""
    S, m = problem.num_stages, problem.num_microbatches
    found = len(violations)
    part_ids = []
    for part in op.parts:
        kind, s, j = part
        if not (isinstance(s, int) and 0 <= s < S) or not (isinstance(j, int) and 0 <= j < m):
            violations.append(Violation(
                "unknown_op", f"{op} at rank {r} position {i}: its {kind} part {part} is not "
                f"an op of this profile (stages 0..{S - 1}, microbatches 0..{m - 1})", r, i))
            continue
        if problem.stage_to_rank[s] != r:
            violations.append(Violation(
                "wrong_rank", f"{op} at rank {r} position {i}: stage {s} of its {kind} part "
                f"runs on rank {problem.stage_to_rank[s]} ({problem.placement} placement)",
                r, i))
            continue
        x = (_KIND_INDEX[kind] * S + s) * m + j
        if where[x] != _NO_OP:
            r0, i0 = divmod(where[x], 1 << 32)
            violations.append(Violation(
                "duplicate", f"{part} appears twice: rank {r0} position {i0} and as a part "
                f"of {op} at rank {r} position {i}", r, i))
            continue
        part_ids.append(x)
    if len(violations) == found and op.stage_b == S - 1 and \
            (op.stage, op.microbatch) == (op.stage_b, op.microbatch_b):
        violations.append(Violation(
            "fb_self", f"{op} at rank {r} position {i}: its backward needs its own forward's "
            "output; run them as F then BW", r, i))
    if len(violations) > found:
        return _NO_OP
    for x in part_ids:
        where[x] = (r << 32) + i
    pairs.append((part_ids[0], part_ids[1]))
    return _FB * S * m + len(pairs) - 1


def _check_complete(problem: Problem, where: list[int], violations: list[Violation]) -> None:
    """Each (stage, microbatch) needs one F and either B and W, or BW."""
    S, m = problem.num_stages, problem.num_microbatches
    block = S * m
    for s in range(S):
        for j in range(m):
            x = s * m + j
            has_f, has_b = where[x] != _NO_OP, where[block + x] != _NO_OP
            has_w, has_bw = where[2 * block + x] != _NO_OP, where[3 * block + x] != _NO_OP
            if has_f and (has_bw != (has_b or has_w)) and has_b == has_w:
                continue  # the common case: F and exactly one way of doing the backward
            missing = [] if has_f else ["F"]
            if has_bw and (has_b or has_w):
                r, i = divmod(where[3 * block + x], 1 << 32)
                violations.append(Violation(
                    "mixed_backward", f"stage {s} microbatch {j} has both BW and a split "
                    "B/W; use BW alone or B and W", r, i))
            elif not has_bw:
                missing += [k for k, has in (("B", has_b), ("W", has_w)) if not has]
            rank = problem.stage_to_rank[s]
            for k in missing:
                violations.append(Violation(
                    "missing", f"{s}{k}{j} (rank {rank}) is missing from the schedule", rank))


def _time(problem: Problem, ranks: list[list[Op]], ids: list[list[int]], where: list[int],
          pairs: list[tuple[int, int]]) -> tuple[list[list[float | None]], list[list[float | None]],
                     dict[int, tuple[int, int]]]:
    """List scheduling by the timing kernel (`sim.kernel`): start and end times (None
    where never timed) and, for each rank left blocked, the position of its first
    untimed op and the id of the op that one waits for."""
    kernel = Kernel(problem, ids, pairs, record=True)
    kernel.run()
    stuck = kernel.stuck()
    block = problem.num_stages * problem.num_microbatches
    for r, (i, dep) in stuck.items():
        # The kernel waits for a B's slot, which a BW also ends: name the op listed.
        if block <= dep < 2 * block and where[dep] == _NO_OP \
                and where[dep + 2 * block] != _NO_OP:
            stuck[r] = (i, dep + 2 * block)
    return kernel.start, kernel.end, stuck


def _op_of(problem: Problem, x: int) -> Op:
    block = problem.num_stages * problem.num_microbatches
    k, sj = divmod(x, block)
    s, j = divmod(sj, problem.num_microbatches)
    return Op(KINDS[k], s, j)


def _deadlocks(problem: Problem, ranks: list[list[Op]], where: list[int],
               stuck: dict[int, tuple[int, int]]) -> list[Violation]:
    """Name the cycles among blocked ranks: each head waits for an op behind another head."""
    found: list[Violation] = []
    seen: set[int] = set()
    for first in stuck:
        path: list[int] = []
        r: int | None = first
        while r is not None and r in stuck and r not in seen and r not in path:
            path.append(r)
            located = where[stuck[r][1]]
            r = located >> 32 if located != _NO_OP else None  # missing: reported as such
        if r is not None and r in path:
            for q in path[path.index(r):]:
                head, dep = stuck[q]
                dep_rank, dep_pos = divmod(where[dep], 1 << 32)
                blocker_pos = stuck[dep_rank][0]
                found.append(Violation(
                    "deadlock", f"deadlock: {ranks[q][head]} (rank {q} position {head}) waits "
                    f"for {_op_of(problem, dep)} (rank {dep_rank} position {dep_pos}), which "
                    f"is queued behind {ranks[dep_rank][blocker_pos]} (rank {dep_rank} "
                    f"position {blocker_pos})", q, head))
        seen.update(path)
    return found


def _check_memory(problem: Problem, ranks: list[list[Op]], ids: list[list[int]],
                  violations: list[Violation], pairs: list[tuple[int, int]],
                  ) -> tuple[float, ...]:
    """Peak of each rank's memory prefix sums; flags the first op over the limit.

    An FB counts as its F part then its BW part: the forward's activations are held
    before the backward frees its own (a sequential runtime does exactly that).
    """
    block = problem.num_stages * problem.num_microbatches
    delta = tables(problem).delta  # by op id
    peaks = []
    for r, row in enumerate(ids):
        held = peak = 0.0
        limit = problem.memory_limit[r] + _MEMORY_EPS
        flagged = False
        for i, x in enumerate(row):
            if x == _NO_OP:
                continue
            if x >= _FB * block:
                # The forward's activations are held before the backward frees its own.
                f_id, bw_id = pairs[x - _FB * block]
                high = held + delta[f_id]
                held = high + delta[bw_id]
                when = "during"
            else:
                held += delta[x]
                high, when = held, "after"
            if high > peak:
                peak = high
                if high > limit and not flagged:
                    flagged = True
                    violations.append(Violation(
                        "memory", f"rank {r} holds {high:g} > memory_limit "
                        f"{problem.memory_limit[r]:g} {when} {ranks[r][i]} (position {i})",
                        r, i))
        peaks.append(peak)
    return tuple(peaks)


def _metrics(problem: Problem, ranks: list[list[Op]], start: list[list[float | None]],
             end: list[list[float | None]], peak: tuple[float, ...],
             has_fb: bool = False) -> Metrics:
    spans = []
    first, last = float("inf"), float("-inf")
    for r, ops in enumerate(ranks):
        if not ops:
            spans.append(0.0)
            continue
        s0, e1 = start[r][0], end[r][-1]
        assert s0 is not None and e1 is not None
        spans.append(e1 - s0)
        first, last = min(first, s0), max(last, e1)
    # A complete schedule runs every op of a rank's stages: its busy time is the profile's.
    busy = problem.busy_per_rank
    if has_fb and problem.overlap != 1:
        # Overlapped FBs take less than their parts: the busy time is the ops' own.
        busy = tuple(sum(duration(problem, op) for op in ops) for ops in ranks)
    cost = max(spans)
    makespan = last - first if first <= last else 0.0
    # A span is never shorter than the rank's op time; the two sums round differently,
    # so a rank without idle time would otherwise read -2e-16.
    bubble = max(0.0, (cost - max(busy)) / cost) if cost > 0 else 0.0
    idle = tuple(max(0.0, (sp - b) / sp) if sp > 0 else 0.0
                 for sp, b in zip(spans, busy, strict=True))
    bound = clamped_to(general_lower_bound(problem), cost)
    return Metrics(cost, makespan, bubble, peak, bound, tuple(spans), busy, idle)
