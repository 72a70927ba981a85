"""The timing rules of copy lanes and recomputation (DESIGN.md 6.3), checked on times.

List scheduling (`solver.lanes`) keeps these rules by construction; this module checks
them on any start/end times: the simulator's own (a guard that every emitted schedule
keeps them) and the times a schedule file states (`stated_time_violations`), such as a
runtime's measured trace. Host memory over its limit is checked by `solver.lanes` with
the device memory, both taken over time.
"""

from __future__ import annotations

from collections.abc import Sequence

from ppsched.solver.model.errors import Violation
from ppsched.solver.model.ops import Op, lane_of, policy_of
from ppsched.solver.model.policy_fields import PolicyFields, policy_fields
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.schedule import Schedule

_EPS = 1e-9
Times = Sequence[Sequence[float | None]]


def lane_keys(problem: Problem) -> list[int]:
    """For each rank, the owner of its copy lanes: the lowest rank of its
    ``shared_host_link`` group (ranks listed together share their lanes), else itself."""
    owner = list(range(problem.num_ranks))
    for group in policy_fields(problem).shared_host_link:
        for r in group:
            owner[r] = min(group)
    return owner


def timing_violations(problem: Problem, ranks: Sequence[Sequence[Op]], start: Times,
                      end: Times) -> list[Violation]:
    """Every broken timing rule of DESIGN.md 6.3 in `start`/`end` (ops without times are
    skipped): an R that starts before its F ends or ends after its B starts, an L that
    ends after its B starts, two copies on one lane at once."""
    copy_lanes = policy_fields(problem).copy_lanes
    owner = lane_keys(problem)
    begin_of: dict[Op, float] = {}
    end_of: dict[Op, float] = {}
    where: dict[Op, tuple[int, int]] = {}
    lanes: dict[tuple[int, str], list[tuple[float, float, int, int]]] = {}
    for r, ops in enumerate(ranks):
        for i, op in enumerate(ops):
            s, e = start[r][i], end[r][i]
            if s is None or e is None:
                continue
            begin_of[op], end_of[op], where[op] = s, e, (r, i)
            if op.kind in ("O", "L"):
                key = (owner[r], lane_of(op.kind, copy_lanes))
                lanes.setdefault(key, []).append((s, e, r, i))
    found: list[Violation] = []
    for op, (r, i) in where.items():
        if op.kind not in ("R", "L"):
            continue
        backward = next((b for b in (Op("B", op.stage, op.microbatch),
                                     Op("BW", op.stage, op.microbatch)) if b in begin_of), None)
        if op.kind == "R":
            forward = Op("F", op.stage, op.microbatch)
            if forward in end_of and begin_of[op] < end_of[forward] - _EPS:
                found.append(Violation("recompute_early", f"{op} (rank {r} position {i}) "
                                       f"starts at {begin_of[op]:g}, before its F ends at "
                                       f"{end_of[forward]:g}", r, i))
        if backward is not None and end_of[op] > begin_of[backward] + _EPS:
            what = "reload" if op.kind == "L" else "recompute"
            found.append(Violation(f"late_{what}", f"{op} (rank {r} position {i}) ends at "
                                   f"{end_of[op]:g}, after its {backward.kind} starts at "
                                   f"{begin_of[backward]:g}", r, i))
    for (lane_owner, lane), copies in sorted(lanes.items()):
        copies.sort()
        busy_until, r0, i0 = -float("inf"), -1, -1  # the copy that runs longest so far
        for s1, e1, r1, i1 in copies:
            if s1 < busy_until - _EPS:
                first, second = ranks[r0][i0], ranks[r1][i1]
                found.append(Violation("lane_overlap", f"{second} (rank {r1} position "
                                       f"{i1}) starts at {s1:g} on lane {lane} of rank "
                                       f"{lane_owner} while {first} (rank {r0}) runs until "
                                       f"{busy_until:g}: a lane runs one copy at a time",
                                       r1, i1))
            if e1 > busy_until:
                busy_until, r0, i0 = e1, r1, i1
    return found


def stated_time_violations(schedule: Schedule) -> list[Violation]:
    """`timing_violations` on the times a schedule file states (its ops' ``start`` and
    ``end``), e.g. a measured trace written as a schedule, and host memory over its limit
    taken over those times; ops without times are skipped."""

    problem = schedule.problem()
    ranks = schedule.orders()
    start = [[x.start for x in rank] for rank in schedule.ranks]
    end = [[x.end for x in rank] for rank in schedule.ranks]
    found = timing_violations(problem, ranks, start, end)
    _, host = peaks_over_time(problem, ranks, start, end)
    limit = policy_fields(problem).host_memory_limit
    found += [Violation("host_memory", f"rank {r} holds {held:g} on the host > "
                        f"host_memory_limit {limit[r]:g}", r)
              for r, held in enumerate(host) if held > limit[r] + _EPS]
    return found


def memory_changes(problem: Problem, op: Op, policy: dict[tuple[int, int], str],
                   fields: PolicyFields | None = None) -> tuple[float, float, float, float]:
    """(device increase at start, device decrease at end, host increase at start, host
    decrease at end) of `op` (DESIGN.md 6.3). `fields`: `problem`'s, where the caller
    has them (resolving them per op was a tenth of a policy solve)."""
    fields = fields or policy_fields(problem)
    kind, s, j = op
    m_b, m_w = problem.m_b[s], problem.m_w[s]
    host_up = host_down = 0.0
    if kind == "F":
        delta = fields.m_ckpt[s] if policy.get((s, j)) == "recompute" else m_b
    elif kind == "R":
        delta = m_b - fields.m_ckpt[s]
    elif kind == "O":
        delta = -(m_b - fields.m_keep[s])
        host_up = m_b - fields.m_keep[s]
    elif kind == "L":
        delta = m_b - fields.m_keep[s]
        host_down = -(m_b - fields.m_keep[s])
    elif kind == "B":
        delta = m_w - m_b
    elif kind == "W":
        delta = -m_w
    else:  # BW
        delta = -m_b
    return max(delta, 0.0), min(delta, 0.0), host_up, host_down


def peaks_over_time(problem: Problem, ranks: list[list[Op]], start: list[list[float | None]],
                    end: list[list[float | None]]) -> tuple[list[float], list[float]]:
    """Each rank's device and host peak, memory taken over time."""
    policy = policy_of(ranks)
    fields = policy_fields(problem)
    device_peaks: list[float] = []
    host_peaks: list[float] = []
    for r, ops in enumerate(ranks):
        device: list[tuple[float, int, float]] = []
        host: list[tuple[float, int, float]] = []
        for i, op in enumerate(ops):
            begin, finish = start[r][i], end[r][i]
            if begin is None or finish is None:
                continue
            up, down, host_up, host_down = memory_changes(problem, op, policy, fields)
            device += [(begin, 1, up), (finish, 0, down)]
            host += [(begin, 1, host_up), (finish, 0, host_down)]
        for events, peaks in ((device, device_peaks), (host, host_peaks)):
            events.sort()
            held = peak = 0.0
            for _, _, change in events:
                held += change
                peak = max(peak, held)
            peaks.append(peak)
    return device_peaks, host_peaks
