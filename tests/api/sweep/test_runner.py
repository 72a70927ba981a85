"""Running a sweep in process pools: rows, error rows, resume, kept schedules, records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ppsched.api.sweep.expand import expand_grid
from ppsched.api.sweep.grid import load_grid
from ppsched.api.sweep.records import RowWriter, read_rows
from ppsched.api.sweep.runner import run_sweep
from ppsched.api.sweep.task import RESULT_FIELDS
from ppsched.solver.model.schedule import parse_schedule

from tests.api.sweep.conftest import WriteGrid

GRID = """
profiles: [{UNIFORM}]
methods: [1f1b, zb-h2, heuristic]
axes:
  m: [4, 8]
  memory_limit: [1p, 2p]
"""


def test_rows_carry_config_and_figures(write_grid: WriteGrid, tmp_path: Path) -> None:
    tasks = expand_grid(load_grid(write_grid(GRID)))
    out = tmp_path / "rows.jsonl"
    outcome = run_sweep(tasks, out, jobs=2, progress=False,
                        keep_dir=str(tmp_path / "schedules"))
    rows = read_rows(out)
    assert (outcome.done, outcome.skipped, outcome.lost) == (len(tasks), 0, 0)
    assert sorted(r["key"] for r in rows) == sorted(t.key for t in tasks)
    by = {(r["m"], r["memory"], r["method"]): r for r in rows}
    for row in rows:
        assert set(RESULT_FIELDS) <= set(row)
        assert {"p", "m", "v", "placement", "memory", "memory_limit", "t_comm"} <= set(row)
    # DESIGN.md closed forms on unit stages: 1F1B bubble (p-1)*3 = 9 -> cost 3m + 9.
    one = by[(8, "1p", "1f1b")]
    assert one["status"] == "heuristic"
    assert one["cost"] == pytest.approx(3 * 8 + 9)
    assert one["peak_memory"] == pytest.approx(4)
    assert one["gap"] == pytest.approx((one["cost"] - one["lower_bound"]) / one["cost"])
    # ZB-H2 needs (2p-1) m_b = 7 > 1p = 4: refused, recorded, not a crash.
    refused = by[(8, "1p", "zb-h2")]
    assert refused["status"] == "error" and "memory_limit" in refused["error"]
    assert refused["cost"] is None
    assert outcome.errors == sum(r["status"] == "error" for r in rows) >= 1
    # At 2p ZB-H2 fits and beats 1F1B; kept schedules read back and match the row.
    h2 = by[(8, "2p", "zb-h2")]
    assert h2["cost"] < one["cost"]
    schedule = parse_schedule(json.loads(Path(h2["schedule"]).read_text()))
    assert schedule.metrics is not None and schedule.metrics.cost == h2["cost"]


def test_rerun_skips_finished_rows(write_grid: WriteGrid, tmp_path: Path) -> None:
    tasks = expand_grid(load_grid(write_grid(GRID)))
    out = tmp_path / "rows.jsonl"
    first = run_sweep(tasks[:5], out, jobs=1, progress=False)
    assert first.done == 5
    second = run_sweep(tasks, out, jobs=1, progress=False)
    assert (second.skipped, second.done) == (5, len(tasks) - 5)
    third = run_sweep(tasks, out, jobs=1, progress=False)
    assert (third.skipped, third.done) == (len(tasks), 0)
    keys = [r["key"] for r in read_rows(out)]
    assert sorted(keys) == sorted(t.key for t in tasks)


def test_truncated_last_line_is_ignored_and_redone(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    out.write_text('{"key": "a", "status": "heuristic"}\n{"key": "b", "sta')
    assert [r["key"] for r in read_rows(out)] == ["a"]
    with RowWriter(out) as writer:
        writer.write({"key": "b", "status": "heuristic"})
    assert out.read_text() == ('{"key": "a", "status": "heuristic"}\n'
                               '{"key":"b","status":"heuristic"}\n')


def test_bad_job_count_is_refused(write_grid: WriteGrid, tmp_path: Path) -> None:
    tasks = expand_grid(load_grid(write_grid(GRID)))
    with pytest.raises(ValueError, match="invalid 'jobs': got 0; expected an integer >= 1"):
        run_sweep(tasks, tmp_path / "rows.jsonl", jobs=0, progress=False)
