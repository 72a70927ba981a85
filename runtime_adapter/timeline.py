"""The recorded timeline: each op's measured start and end per rank, and its comparison
with the simulator's prediction (per op and per rank span).

A measured timeline becomes a `Schedule` whose times are milliseconds from the step's
start, so the solver's views (`solver.render.trace.render_trace`, SVG) draw it as they
draw a prediction. The prediction is in the profile's time unit: compare it with a
measurement only when the profile was measured in ms (as `runtime_adapter.profiler`
writes it).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from ppsched.solver.model import Kind, Op, Schedule, ScheduledOp, ScheduleMetrics
from ppsched.solver.sim import schedule_from_orders


@dataclass(frozen=True)
class OpRecord:
    """One op as it ran: seconds from the step's start (after the aligning barrier)."""

    kind: Kind
    stage: int
    microbatch: int
    start_s: float
    end_s: float

    @property
    def op(self) -> Op:
        return Op(self.kind, self.stage, self.microbatch)


def gather_records(records: list[OpRecord], group: Any = None) -> list[list[OpRecord]]:
    """Every rank's records, on every rank (one ``all_gather_object``)."""
    import torch.distributed as dist

    world = dist.get_world_size(group)
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, [asdict(r) for r in records], group=group)
    return [[OpRecord(**r) for r in rank] for rank in gathered]


def timed(schedule: Schedule) -> Schedule:
    """`schedule` with simulated times (re-timed when its JSON came without them)."""
    try:
        schedule.require_times()
        return schedule
    except ValueError:
        return schedule_from_orders(schedule.profile, schedule.orders(), schedule.method)


def measured_schedule(schedule: Schedule, per_rank: list[list[OpRecord]]) -> Schedule:
    """The schedule as it ran: measured times in ms from the earliest op's start.

    Raises:
        ValueError: when the records are not the schedule's ops in its order.
    """
    orders = schedule.orders()
    if len(per_rank) != len(orders):
        raise ValueError(f"invalid 'records': got {len(per_rank)} ranks; expected "
                         f"{len(orders)}")
    for r, (ops, recs) in enumerate(zip(orders, per_rank, strict=True)):
        if [x.op for x in recs] != list(ops):
            raise ValueError(f"invalid 'records' of rank {r}: the ops are not the schedule's "
                             "order (was the step recorded with record=True?)")
    t0 = min((x.start_s for recs in per_rank for x in recs), default=0.0)
    times = [[((x.start_s - t0) * 1e3, (x.end_s - t0) * 1e3) for x in recs]
             for recs in per_rank]
    ranks = [[ScheduledOp(kind=x.kind, stage=x.stage, microbatch=x.microbatch, start=a, end=b)
              for x, (a, b) in zip(recs, ts, strict=True)]
             for recs, ts in zip(per_rank, times, strict=True)]
    spans = [ts[-1][1] - ts[0][0] if ts else 0.0 for ts in times]
    busy = [sum(b - a for a, b in ts) for ts in times]
    cost = max(spans, default=0.0)
    makespan = max((ts[-1][1] for ts in times if ts), default=0.0)
    predicted = timed(schedule).metrics
    metrics = ScheduleMetrics(
        cost=cost, makespan=makespan,
        bubble_rate=(cost - max(busy)) / cost if cost > 0 else 0.0,
        peak_memory=list(predicted.peak_memory) if predicted else [],
        lower_bound=max(busy, default=0.0), span=spans,
        idle_fraction=[1 - b / s if s > 0 else 0.0 for b, s in zip(busy, spans, strict=True)])
    return Schedule(profile=schedule.profile, method=f"{schedule.method} (measured)",
                    ranks=ranks, metrics=metrics)


@dataclass(frozen=True)
class RankComparison:
    rank: int
    predicted_span: float
    measured_span: float
    error: float  # (measured - predicted) / measured


@dataclass(frozen=True)
class KindComparison:
    kind: str
    count: int
    predicted_mean: float
    measured_mean: float
    mean_abs_error: float  # mean over ops of |measured - predicted| / measured


@dataclass(frozen=True)
class Comparison:
    """Predicted against measured: per rank span, per op kind, and the cost."""

    method: str
    predicted_cost: float
    measured_cost: float
    ranks: list[RankComparison]
    kinds: list[KindComparison]
    ops: list[tuple[int, str, float, float]]  # rank, op, predicted, measured duration

    @property
    def cost_error(self) -> float:
        return _rel(self.predicted_cost, self.measured_cost)


def compare(predicted: Schedule, measured: Schedule) -> Comparison:
    """Compare a prediction with a measurement of the same orders (times in one unit)."""
    predicted = timed(predicted)
    if predicted.orders() != measured.orders():
        raise ValueError("invalid 'measured': its orders are not the predicted schedule's")
    ranks: list[RankComparison] = []
    ops: list[tuple[int, str, float, float]] = []
    by_kind: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for r, (pr, mr) in enumerate(zip(predicted.ranks, measured.ranks, strict=True)):
        if not pr:
            continue
        p_span = _end(pr[-1]) - _start(pr[0])
        m_span = _end(mr[-1]) - _start(mr[0])
        ranks.append(RankComparison(r, p_span, m_span, _rel(p_span, m_span)))
        for p_op, m_op in zip(pr, mr, strict=True):
            p_dur, m_dur = _end(p_op) - _start(p_op), _end(m_op) - _start(m_op)
            ops.append((r, str(p_op.op), p_dur, m_dur))
            by_kind[p_op.kind].append((p_dur, m_dur))
    kinds = [KindComparison(kind, len(pairs), sum(p for p, _ in pairs) / len(pairs),
                            sum(m for _, m in pairs) / len(pairs),
                            sum(abs(_rel(p, m)) for p, m in pairs) / len(pairs))
             for kind, pairs in sorted(by_kind.items())]
    return Comparison(predicted.method, max(x.predicted_span for x in ranks),
                      max(x.measured_span for x in ranks), ranks, kinds, ops)


def format_report(comparison: Comparison, unit: str = "ms") -> str:
    """A small text report: cost, each rank's span, and each op kind's mean duration."""
    lines = [f"schedule {comparison.method}: predicted cost {comparison.predicted_cost:.3f} "
             f"{unit}, measured {comparison.measured_cost:.3f} {unit} "
             f"(error {comparison.cost_error:+.1%})",
             "",
             f"{'rank':>4}  {'predicted span':>14}  {'measured span':>13}  {'error':>7}"]
    for x in comparison.ranks:
        lines.append(f"{x.rank:>4}  {x.predicted_span:>14.3f}  {x.measured_span:>13.3f}  "
                     f"{x.error:>+7.1%}")
    lines += ["", f"{'op':>4}  {'count':>5}  {'predicted mean':>14}  {'measured mean':>13}  "
              f"{'mean |error|':>12}"]
    for k in comparison.kinds:
        lines.append(f"{k.kind:>4}  {k.count:>5}  {k.predicted_mean:>14.3f}  "
                     f"{k.measured_mean:>13.3f}  {k.mean_abs_error:>12.1%}")
    return "\n".join(lines) + "\n"


def _start(op: ScheduledOp) -> float:
    assert op.start is not None, "timed schedules only"
    return op.start


def _end(op: ScheduledOp) -> float:
    assert op.end is not None, "timed schedules only"
    return op.end


def _rel(predicted: float, measured: float) -> float:
    """Prediction error relative to the measurement: (measured - predicted) / measured."""
    return (measured - predicted) / measured if measured > 0 else 0.0
