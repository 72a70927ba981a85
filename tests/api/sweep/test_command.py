"""`ppsched sweep` as a user runs it: a subprocess, killed and resumed, interrupted, reported."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from ppsched.api.sweep.expand import expand_grid
from ppsched.api.sweep.grid import load_grid
from ppsched.api.sweep.records import read_rows

from tests.api.sweep.conftest import ROOT, WriteGrid

# About 150 heuristic rows of p = 8: several seconds with one worker.
LONG_GRID = """
profiles: [{GPT}]
methods: [heuristic, zb-h1]
axes:
  m: [24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 136]
  memory_limit: [1p, 1.25p, 1.5p, 1.75p, 2p]
"""


def start(*args: str) -> subprocess.Popen[str]:
    # As a terminal starts it: SIGINT at its default. A shell that runs the tests in the
    # background (`make test &`) ignores SIGINT, and children inherit that, so a sweep
    # started from here would (rightly) ignore Ctrl-C too.
    return subprocess.Popen([sys.executable, "-m", "ppsched.api.cli", "sweep", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, preexec_fn=_default_sigint)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for_rows(out: Path, count: int, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        if out.exists() and out.read_bytes().count(b"\n") >= count:
            return
        time.sleep(0.05)
    pytest.fail(f"the sweep wrote fewer than {count} rows (exit {process.poll()})")


@pytest.mark.slow
def test_killed_sweep_resumes_without_duplicates_or_gaps(write_grid: WriteGrid,
                                                         tmp_path: Path) -> None:
    grid = write_grid(LONG_GRID)
    expected = sorted(t.key for t in expand_grid(load_grid(grid)))
    out = tmp_path / "rows.jsonl"
    process = start(str(grid), "-o", str(out), "--jobs", "1", "--no-progress")
    wait_for_rows(out, 10, process)
    os.killpg(process.pid, signal.SIGKILL)  # the sweep and its worker, mid-write or not
    process.communicate(timeout=30)
    before = read_rows(out)
    assert 10 <= len(before) < len(expected)
    done = subprocess.run([sys.executable, "-m", "ppsched.api.cli", "sweep", str(grid), "-o",
                           str(out), "--jobs", "2", "--no-progress"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"({len(expected) - len(before)} solved now, {len(before)} from before" \
        in done.stdout
    keys = [r["key"] for r in read_rows(out)]
    assert sorted(keys) == expected  # each key exactly once
    assert out.read_text().count("\n") == len(expected)


@pytest.mark.slow
def test_ctrl_c_keeps_rows_and_says_how_to_resume(write_grid: WriteGrid,
                                                  tmp_path: Path) -> None:
    grid = write_grid(LONG_GRID)
    out = tmp_path / "rows.jsonl"
    process = start(str(grid), "-o", str(out), "--jobs", "2", "--no-progress")
    wait_for_rows(out, 5, process)
    os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, (stderr, stdout)
    saved = len(read_rows(out))
    lines = stderr.strip().splitlines()
    assert lines == [f"ppsched: interrupted: {saved} of 150 rows saved in {out}; rerun the "
                     "same command to resume"]


def test_report_summary_exports_and_plots(write_grid: WriteGrid, tmp_path: Path) -> None:
    grid = write_grid("""
        profiles: [{UNIFORM}]
        methods: [1f1b, zb-h1, heuristic]
        axes:
          p: [2, 4]
          m: [4, 8]
          memory_limit: [1p, 2p]
    """)
    out, csv, parquet = tmp_path / "r.jsonl", tmp_path / "r.csv", tmp_path / "r.parquet"
    result = subprocess.run(
        [sys.executable, "-m", "ppsched.api.cli", "sweep", str(grid), "-o", str(out), "--jobs", "2",
         "--no-progress", "--csv", str(csv), "--parquet", str(parquet), "--plots",
         str(tmp_path / "plots")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Best method per configuration (8)" in result.stdout
    assert "24 of 24 rows" in result.stdout
    rows = read_rows(out)
    table = pq.read_table(parquet).to_pylist()
    assert sorted(r["key"] for r in table) == sorted(r["key"] for r in rows)
    by_key = {r["key"]: r for r in rows}
    assert all(r["cost"] == by_key[r["key"]]["cost"] for r in table)
    assert csv.read_text().splitlines()[0].startswith("key,profile,p,m,v,placement,memory")
    assert len(csv.read_text().splitlines()) == 25
    for name in ("bubble_vs_memory", "cost_vs_m", "speedup_heatmap"):
        for fmt in ("png", "svg"):
            path = tmp_path / "plots" / f"{name}.{fmt}"
            assert path.stat().st_size > 1000, path


def test_bad_grid_is_one_line_and_exit_2(write_grid: WriteGrid, tmp_path: Path) -> None:
    grid = write_grid("profiles: [{UNIFORM}]\nmethods: [heuristic]\naxes:\n  pp: [4]\n")
    result = subprocess.run([sys.executable, "-m", "ppsched.api.cli", "sweep", str(grid), "-o",
                             str(tmp_path / "r.jsonl")], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"ppsched: error: {grid}, line 4: unknown axis 'pp' (did you mean 'p'?); the axes "
        "are p, m, v, placement, memory_limit, t_f, t_b, t_w, t_comm, m_b, m_w, "
        "microbatch_spread, offload_ratio, host_bandwidth, gpus_per_node, recompute_stages, "
        "scale.FIELD and scale.FIELD[STAGE] (FIELD one of t_f, t_b, t_w, t_comm, m_b, m_w)"]
    assert not (tmp_path / "r.jsonl").exists()


def test_dry_run_counts_rows(write_grid: WriteGrid) -> None:
    grid = write_grid(LONG_GRID)
    result = subprocess.run([sys.executable, "-m", "ppsched.api.cli", "sweep", str(grid),
                             "--dry-run"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert "150 rows (75 configurations x 2 methods at most)" in result.stdout
