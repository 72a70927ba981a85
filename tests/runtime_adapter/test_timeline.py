"""The recorded timeline as a schedule, its trace, and the comparison report."""

from __future__ import annotations

import pytest
from ppsched.runtime_adapter.timeline import OpRecord, compare, format_report, measured_schedule
from ppsched.solver.render.trace import render_trace

from tests.runtime_adapter.workers import build_schedule


def _records(schedule, scale: float, offset: float):  # type: ignore[no-untyped-def]
    return [[OpRecord(x.kind, x.stage, x.microbatch, offset + x.start * scale / 1e3,
                      offset + x.end * scale / 1e3) for x in rank] for rank in schedule.ranks]


def test_a_timeline_twice_as_slow_reads_as_a_100_percent_error() -> None:
    schedule = build_schedule("1f1b", 2, 4)
    measured = measured_schedule(schedule, _records(schedule, 2.0, 5.0))
    assert measured.method == "1f1b (measured)"
    assert measured.ranks[0][0].start == 0.0  # ms from the earliest op
    assert measured.metrics is not None
    assert measured.metrics.cost == pytest.approx(2 * schedule.metrics.cost)
    comparison = compare(schedule, measured)
    assert comparison.cost_error == pytest.approx(0.5)  # (measured - predicted) / measured
    assert all(k.mean_abs_error == pytest.approx(0.5) for k in comparison.kinds)
    report = format_report(comparison)
    assert "error +50.0%" in report and "BW" in report
    trace = render_trace(measured)
    ops = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(ops) == sum(len(r) for r in schedule.ranks)


def test_records_in_another_order_are_refused() -> None:
    schedule = build_schedule("1f1b", 2, 4)
    records = _records(schedule, 1.0, 0.0)
    records[1] = list(reversed(records[1]))
    with pytest.raises(ValueError, match="records' of rank 1"):
        measured_schedule(schedule, records)
