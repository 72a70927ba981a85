"""The Chrome/Perfetto trace of a timed schedule: one track per rank, real durations.

Load the JSON in https://ui.perfetto.dev or chrome://tracing. Times are taken to be in
milliseconds (the unit DESIGN.md section 2 advises) and written in microseconds.
"""

from __future__ import annotations

from typing import Any

from ppsched.solver.model.ops import lane_of
from ppsched.solver.model.schedule import Schedule, ScheduledOp
from ppsched.solver.render.sizes import input_microbatch, microbatch_sizes

_PID = 0  # one process: the pipeline
_US_PER_UNIT = 1000.0  # profile times are ms; trace timestamps are us


def _fb_args(op: ScheduledOp) -> dict[str, Any]:
    """An FB's BW part (DESIGN.md 6.4), in its event's args; nothing for other ops."""
    if op.kind != "FB":
        return {}
    return {"stage_b": op.stage_b, "microbatch_b": op.microbatch_b}


def _size_args(schedule: Schedule, sizes: tuple[float, ...] | None,
               op: ScheduledOp) -> dict[str, Any]:
    """With unequal microbatches (DESIGN.md 6.2): the op's microbatch size relative to
    the mean and the input microbatch it is; nothing otherwise."""
    if sizes is None:
        return {}
    return {"microbatch_size": round(sizes[op.microbatch], 4),
            "input_microbatch": input_microbatch(schedule, op.microbatch)}


_LANES = ("d2h", "h2d", "copy")


def _lane(op: ScheduledOp, schedule: Schedule) -> str:
    """An O/L's copy lane: as the JSON states it, else as the profile's copy_lanes gives."""
    return op.lane or lane_of(op.kind, schedule.profile.copy_lanes)


def _copy_threads(schedule: Schedule) -> dict[tuple[int, str], int]:
    """The thread id of each (rank, copy lane) that runs copies: after every rank's own
    id, so that a rank's compute thread keeps ``tid`` = rank."""
    used = sorted({(r, _lane(op, schedule)) for r, rank in enumerate(schedule.ranks)
                   for op in rank if op.kind in ("O", "L")},
                  key=lambda x: (x[0], _LANES.index(x[1])))
    return {key: len(schedule.ranks) + n for n, key in enumerate(used)}


def render_trace(schedule: Schedule) -> dict[str, Any]:
    """The Chrome trace-event JSON object of `schedule` (``json.dumps`` it to save).

    One process named after the profile, one thread per rank (``tid`` = rank, named
    ``rank r``) and one per copy lane a rank uses (named ``rank r d2h``, DESIGN.md 6.3;
    R stays on its rank's thread), and one complete event (``"ph": "X"``) per op, named
    like ``F3`` (``F3s5`` when ranks run several stages), with ``cat`` the op kind and
    ``args`` its stage, microbatch and kind (and, with unequal microbatches,
    ``microbatch_size`` relative to the mean and ``input_microbatch``).

    Raises:
        ValueError: when an op has no start or end (re-time the orders with
            ``schedule_from_orders`` first).
    """
    profile = schedule.profile
    multi_stage = profile.num_chunks > 1
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": _PID, "tid": 0,
         "args": {"name": f"{profile.label}: {schedule.method}"}},
    ]
    num_ranks = len(schedule.ranks)
    copies = _copy_threads(schedule)
    for r in range(num_ranks):
        # Without a sort index viewers order tracks by name, putting rank 10 before rank 2.
        # With copy lanes each rank's lanes sort right under it (DESIGN.md 6.3).
        slots = 1 + len(_LANES) if copies else 1
        events.append({"name": "thread_name", "ph": "M", "pid": _PID, "tid": r,
                       "args": {"name": f"rank {r}"}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": _PID, "tid": r,
                       "args": {"sort_index": r * slots}})
        for lane in _LANES:
            if (r, lane) in copies:
                tid = copies[(r, lane)]
                events.append({"name": "thread_name", "ph": "M", "pid": _PID, "tid": tid,
                               "args": {"name": f"rank {r} {lane}"}})
                events.append({"name": "thread_sort_index", "ph": "M", "pid": _PID,
                               "tid": tid, "args": {
                                   "sort_index": r * slots + 1 + _LANES.index(lane)}})
    schedule.require_times()
    sizes = microbatch_sizes(schedule)  # None: alike microbatches, no size in the args
    for r, rank in enumerate(schedule.ranks):
        for op in rank:
            assert op.start is not None and op.end is not None  # required above
            tid = copies[(r, _lane(op, schedule))] if op.kind in ("O", "L") else r
            events.append({
                "name": op.op.cell(with_stage=multi_stage), "cat": op.kind, "ph": "X",
                "pid": _PID, "tid": tid,
                "ts": op.start * _US_PER_UNIT, "dur": (op.end - op.start) * _US_PER_UNIT,
                "args": {"stage": op.stage, "microbatch": op.microbatch, "kind": op.kind,
                         **_fb_args(op), **_size_args(schedule, sizes, op)},
            })
    trace: dict[str, Any] = {"traceEvents": events, "displayTimeUnit": "ms"}
    # Viewers show otherData as the trace's metadata.
    other: dict[str, Any] = {"profile": profile.label, "method": schedule.method}
    if schedule.metrics is not None:
        other.update(cost=schedule.metrics.cost, bubble_rate=schedule.metrics.bubble_rate,
                     lower_bound=schedule.metrics.lower_bound,
                     peak_memory=max(schedule.metrics.peak_memory, default=0.0))
    if schedule.solver is not None:
        other.update(status=schedule.solver.status, gap=schedule.solver.gap)
    trace["otherData"] = other
    return trace
