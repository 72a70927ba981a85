"""Timing with copy lanes (DESIGN.md 6.3), for orders that hold R, O or L ops.

`solver.simulator.simulate` hands an order with policy ops here. An order without R/O/L
never comes here: today's figures are untouched.

The rules, section 6.3 as written, plus one where it is silent:

- each rank has a compute lane (F, B, W, BW, R) and copy lanes (``d2h`` for O and ``h2d``
  for L, or one ``copy`` lane for both with ``copy_lanes: 1``); every lane runs its ops in
  list order, one at a time; an op starts at the max of its lane's previous end and its
  dependencies' ends (``t_comm`` only across ranks);
- **issue rule** (not in 6.3): a copy op also starts no earlier than the start of the
  compute op listed just before it on its rank. A runtime issues an asynchronous copy when
  its program reaches it; without this rule an L would start as soon as its O ended and
  the lane was free, so with two lanes an offloaded activation would come straight back
  and offload could never lower a peak;
- memory over time: an increase at an op's start, a decrease at its end, ends before
  starts at one instant; host memory likewise (O adds at its start, L frees at its end);
- ranks of a ``shared_host_link`` group share their copy lanes: their copies on a lane
  run first come, first served (by ready time, ties to the lower rank), timed event by
  event (`_time_shared_lanes`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.errors import Violation
from ppsched.solver.model.ops import Op, lane_of, policy_of
from ppsched.solver.model.policy_fields import policy_fields
from ppsched.solver.model.problem import Problem
from ppsched.solver.sim.kernel import KIND_INDEX, NO_OP, input_ready, slot, tables
from ppsched.solver.sim.lane_rules import (
    lane_keys,
    peaks_over_time,
    timing_violations,
)
from ppsched.solver.sim.result import Metrics, Simulation

POLICY_KINDS = ("R", "O", "L")
_COPY = ("O", "L")
_EPS = 1e-9


def has_policy_ops(order: Sequence[Sequence[Op]]) -> bool:
    # A set of each rank's kinds: a third of the time of a test per op (every
    # simulation asks, issue 11).
    return any(not {op[0] for op in ops}.isdisjoint(POLICY_KINDS) for ops in order)


def check_policy_ops(problem: Problem, ranks: list[list[Op]]) -> list[Violation]:
    """The rules an order with R/O/L can break besides timing and memory."""
    fields = policy_fields(problem)
    found: list[Violation] = []
    seen: dict[Op, tuple[int, int]] = {}
    S, m = problem.num_stages, problem.num_microbatches
    for r, ops in enumerate(ranks):
        for i, op in enumerate(ops):
            kind, s, j = op
            if kind not in ("F", "B", "W", "BW", *POLICY_KINDS) or not 0 <= s < S \
                    or not 0 <= j < m:
                found.append(Violation("unknown_op", f"{op} at rank {r} position {i} is not "
                                       "an op of this profile", r, i))
                continue
            if problem.stage_to_rank[s] != r:
                found.append(Violation("wrong_rank", f"{op} at rank {r} position {i}: stage "
                                       f"{s} runs on rank {problem.stage_to_rank[s]}", r, i))
            if op in seen:
                found.append(Violation("duplicate", f"{op} appears twice", r, i))
            seen[op] = (r, i)
            if kind == "R" and not fields.can_recompute:
                found.append(Violation("policy", f"{op}: the profile offers no recompute "
                                       "(set t_r or m_ckpt)", r, i))
            if kind in _COPY and not fields.can_offload:
                found.append(Violation("policy", f"{op}: the profile offers no offload "
                                       "(set t_offload)", r, i))
    found += _check_policy_complete(problem, seen)
    for r, ops in enumerate(ranks):
        position = {op: i for i, op in enumerate(ops)}
        for i, op in enumerate(ops):
            if op.kind == "R" and position.get(Op("F", op.stage, op.microbatch), -1) > i:
                found.append(Violation("order", f"{op} at rank {r} position {i} is listed "
                                       "before its F", r, i))
    return found


def _check_policy_complete(problem: Problem, seen: dict[Op, tuple[int, int]],
                           ) -> list[Violation]:
    """Each (stage, microbatch): its F and backward, and R or O (with its L), not both."""
    found: list[Violation] = []
    S, m = problem.num_stages, problem.num_microbatches
    for s in range(S):
        for j in range(m):
            has = {k: Op(k, s, j) in seen for k in ("F", "B", "W", "BW", *POLICY_KINDS)}  # type: ignore[arg-type]
            rank = problem.stage_to_rank[s]
            if not has["F"] or not (has["BW"] or (has["B"] and has["W"])):
                found.append(Violation("missing", f"stage {s} microbatch {j} lacks its F, "
                                       "B and W (or BW)", rank))
            if has["R"] and has["O"]:
                found.append(Violation("policy", f"stage {s} microbatch {j} is both "
                                       "recomputed and offloaded", rank))
            if has["O"] != has["L"]:
                found.append(Violation("policy", f"stage {s} microbatch {j} has an "
                                       f"{'O without its L' if has['O'] else 'L without its O'}",
                                       rank))
    return found


class _LaneOps:
    """The rules of the ops of an order with policy ops: section 3's by the timing
    kernel (`sim.kernel.Tables`), and 6.3's for R, O and L. Ops are keyed as the kernel
    keeps their ends (a BW's end is its B's: the B below waits for either), R, O and L
    after them."""

    def __init__(self, problem: Problem, ranks: list[list[Op]]) -> None:
        self.t = tables(problem)
        fields = policy_fields(problem)
        self.policy = policy_of(ranks)
        self.copy_time = {"R": fields.t_r, "O": fields.t_offload, "L": fields.t_reload}
        self.base = {"R": 3, "O": 4, "L": 5}  # their keys: base * block + stage * m + mb

    def key(self, op: Op) -> int:
        kind, s, j = op
        t = self.t
        if kind in self.base:
            return self.base[kind] * t.block + s * t.m + j
        return slot((KIND_INDEX[kind] * t.S + s) * t.m + j, t.block)

    def duration(self, op: Op) -> float:
        kind, s, j = op
        if kind in self.base:
            return self.copy_time[kind][s]
        return self.t.dur[(KIND_INDEX[kind] * self.t.S + s) * self.t.m + j]

    def dependencies(self, op: Op) -> list[tuple[int, float]]:
        """The keys of the ops `op` waits for, each with the latency after its end."""
        kind, s, j = op
        t = self.t
        if kind in ("R", "O"):
            return [(s * t.m + j, 0.0)]  # its F
        if kind == "L":
            return [(self.base["O"] * t.block + s * t.m + j, 0.0)]
        x = (KIND_INDEX[kind] * t.S + s) * t.m + j
        deps = [(t.dep[x], t.lat[x])] if t.dep[x] != NO_OP else []
        if kind in ("B", "BW"):
            policy = self.policy.get((s, j))
            if policy is not None:  # its activation back: recomputed, or reloaded
                deps.append((self.key(Op("R" if policy == "recompute" else "L", s, j)), 0.0))
        return deps


def _lanes(ranks: list[list[Op]], copy_lanes: int,
           ) -> tuple[list[dict[str, list[int]]], list[list[int | None]]]:
    """Per rank, the positions of each lane's ops; and per position, the compute op
    listed before a copy (the issue rule: the copy starts no earlier than its start)."""
    lanes: list[dict[str, list[int]]] = []
    trigger: list[list[int | None]] = []
    for ops in ranks:
        by_lane: dict[str, list[int]] = {}
        previous: int | None = None
        issued: list[int | None] = []
        for i, op in enumerate(ops):
            by_lane.setdefault(lane_of(op.kind, copy_lanes), []).append(i)
            issued.append(previous if op.kind in _COPY else None)
            if op.kind not in _COPY:
                previous = i
        lanes.append(by_lane)
        trigger.append(issued)
    return lanes, trigger


def time_lanes(problem: Problem, ranks: list[list[Op]],
               ) -> tuple[list[list[float | None]], list[list[float | None]]]:
    """List scheduling per lane with the issue rule; None where an op was never timed
    (a deadlock)."""
    fields = policy_fields(problem)
    rules = _LaneOps(problem, ranks)
    lanes, trigger = _lanes(ranks, fields.copy_lanes)
    timeline = _LaneTimeline(ranks, lanes, trigger, rules)
    if any(len(group) > 1 for group in fields.shared_host_link):
        timeline.shared(lane_keys(problem))
    else:
        timeline.passes()
    return timeline.start, timeline.end


class _LaneTimeline:
    """The times of an order on its lanes, as they are found."""

    def __init__(self, ranks: list[list[Op]], lanes: list[dict[str, list[int]]],
                 trigger: list[list[int | None]], rules: _LaneOps) -> None:
        self.ranks, self.lanes, self.trigger, self.rules = ranks, lanes, trigger, rules
        self.start: list[list[float | None]] = [[None] * len(ops) for ops in ranks]
        self.end: list[list[float | None]] = [[None] * len(ops) for ops in ranks]
        self.end_of: dict[int, float] = {}
        self.pointer = [dict.fromkeys(by_lane, 0) for by_lane in lanes]

    def ready(self, r: int, i: int) -> float | None:
        """When the op at rank `r` position `i` may start by its inputs and the issue
        rule, or None while one of them is not timed."""
        begin = input_ready(self.rules.dependencies(self.ranks[r][i]), self.end_of, 0.0)
        issue = self.trigger[r][i]
        if begin is None or issue is None:
            return begin
        issued_at = self.start[r][issue]
        return None if issued_at is None else max(begin, issued_at)

    def place(self, r: int, lane: str, i: int, begin: float) -> float:
        """Time the op at rank `r` position `i` on `lane` from `begin`; its end."""
        op = self.ranks[r][i]
        end = begin + self.rules.duration(op)
        self.start[r][i], self.end[r][i] = begin, end
        self.end_of[self.rules.key(op)] = end
        self.pointer[r][lane] += 1
        return end

    def passes(self) -> None:
        """Each pass times every op whose inputs are timed; ends when stuck."""
        free = [dict.fromkeys(by_lane, 0.0) for by_lane in self.lanes]
        progress = True
        while progress:
            progress = False
            for r, by_lane in enumerate(self.lanes):
                for lane, positions in by_lane.items():
                    while self.pointer[r][lane] < len(positions):
                        i = positions[self.pointer[r][lane]]
                        ready = self.ready(r, i)
                        if ready is None:
                            break
                        free[r][lane] = self.place(r, lane, i, max(free[r][lane], ready))
                        progress = True

    def shared(self, owner: list[int]) -> None:
        """When ranks share copy lanes (``shared_host_link``): event by event.

        Copies of different ranks on a shared lane run first come, first served (by the
        time each is ready, ties to the lower rank; DESIGN.md 6.3), so the next op to time
        is the one that starts first over every lane's head. That is safe: an op whose
        inputs are not timed yet starts no earlier than the earliest head that is ready,
        since its inputs end after it. Each step scans the heads (ranks x lanes): slower
        than the pass-based timing, so only shared links come here.
        """
        free: dict[tuple[int, str], float] = {}
        while True:
            best: tuple[float, float, int, str, int] | None = None
            for r, by_lane in enumerate(self.lanes):
                for lane, positions in by_lane.items():
                    if self.pointer[r][lane] == len(positions):
                        continue
                    i = positions[self.pointer[r][lane]]
                    ready = self.ready(r, i)
                    if ready is None:
                        continue
                    key = (r if lane == "compute" else owner[r], lane)
                    candidate = (max(free.get(key, 0.0), ready), ready, r, lane, i)
                    if best is None or candidate[:3] < best[:3]:
                        best = candidate
            if best is None:
                return  # every op timed, or the rest wait on each other (a deadlock)
            begin, _, r, lane, i = best
            free[(r if lane == "compute" else owner[r], lane)] = self.place(r, lane, i, begin)


def simulate_with_lanes(problem: Problem, ranks: list[list[Op]]) -> Simulation:
    """`ppsched.solver.sim.simulator.simulate` for an order with R, O or L ops (see the module)."""
    violations = check_policy_ops(problem, ranks)
    start, end = time_lanes(problem, ranks)
    # List scheduling keeps 6.3's timing rules by construction; checked all the same, so
    # that a timing bug can never emit a schedule that breaks them.
    violations += timing_violations(problem, ranks, start, end)
    stuck = [r for r, row in enumerate(start) if any(t is None for t in row)]
    for r in stuck:
        i = next(i for i, t in enumerate(start[r]) if t is None)
        violations.append(Violation("deadlock", f"{ranks[r][i]} (rank {r} position {i}) "
                                    "never starts: it waits for an op queued behind it", r, i))
    device, host = peaks_over_time(problem, ranks, start, end)
    fields = policy_fields(problem)
    for r in range(problem.num_ranks):
        if device[r] > problem.memory_limit[r] + _EPS:
            violations.append(Violation("memory", f"rank {r} holds {device[r]:g} > "
                                        f"memory_limit {problem.memory_limit[r]:g} (taken "
                                        "over time)", r))
        if host[r] > fields.host_memory_limit[r] + _EPS:
            violations.append(Violation("host_memory", f"rank {r} holds {host[r]:g} on the "
                                        "host > host_memory_limit "
                                        f"{fields.host_memory_limit[r]:g}", r))
    sim = Simulation(ranks, start, end, tuple(device), violations)
    if stuck or any(v.kind not in ("memory", "host_memory") for v in violations):
        return sim
    spans, busy = [], []
    for r, ops in enumerate(ranks):
        compute = [i for i, op in enumerate(ops) if op.kind not in _COPY]
        if not compute:
            spans.append(0.0)
            busy.append(0.0)
            continue
        first, final = start[r][compute[0]], end[r][compute[-1]]
        assert first is not None and final is not None
        spans.append(final - first)
        busy.append(sum((end[r][i] or 0.0) - (start[r][i] or 0.0) for i in compute))
    compute_times = [t for r, ops in enumerate(ranks) for i, op in enumerate(ops)
                     if op.kind not in _COPY for t in (start[r][i], end[r][i])
                     if t is not None]
    cost = max(spans)
    bound = lower_bound(problem)
    if cost < bound <= cost * (1 + 1e-12):
        bound = cost
    sim.metrics = Metrics(
        cost, max(compute_times) - min(compute_times),
        max(0.0, (cost - max(busy)) / cost) if cost > 0 else 0.0, tuple(device), bound,
        tuple(spans), tuple(busy),
        tuple(max(0.0, (sp - b) / sp) if sp > 0 else 0.0
              for sp, b in zip(spans, busy, strict=True)))
    return sim
