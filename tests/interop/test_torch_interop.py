"""torch.distributed.pipelining and ppsched read each other's per-rank CSV.

torch's own schedules, dumped with its `_dump_csv`, are timed and validated by `ppsched
simulate`; our CSVs are loaded by torch 2.13's `_PipelineScheduleRuntime._load_csv` (the
path torchtitan takes for a custom schedule) and run on 2 gloo ranks, with gradients equal
to the unpipelined model's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ppsched.runtime_adapter.launch import launch_local
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.solving.entry import solve

from tests.interop import torch_side

ROOT = Path(__file__).resolve().parents[2]
UNIFORM = ROOT / "profiles" / "uniform-p4-m8.json"


def ppsched(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ppsched.api.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def _cost(stdout: str) -> float:
    line = next(x for x in stdout.splitlines() if x.startswith("cost"))
    return float(line.split()[1])


def _ours(p: int, m: int, v: int, placement: str | None, method: str) -> float:
    data: dict[str, Any] = {**json.loads(UNIFORM.read_text()), "num_ranks": p,
                            "num_microbatches": m, "num_chunks": v, "placement": placement}
    schedule = solve(parse_profile(data), method)
    assert schedule.metrics is not None
    return schedule.metrics.cost


@pytest.mark.parametrize(("torch_name", "v", "placement"), [
    ("ZBVZeroBubble", 2, "v"), ("Interleaved1F1B", 2, "loop"), ("GPipe", 1, None)])
def test_simulate_times_a_csv_dumped_by_torchs_own_schedule(
        torch_name: str, v: int, placement: str | None, tmp_path: Path) -> None:
    p, m = 4, 8
    csv = tmp_path / f"{torch_name}.csv"
    torch_side.dump_torch_csv(torch_name, p, m, csv)
    result = ppsched("simulate", str(csv), "--profile", str(UNIFORM), "-o",
                     str(tmp_path / "timed.json"), "--svg", str(tmp_path / "timed.svg"))
    assert result.returncode == 0, result.stdout + result.stderr
    shape = f"(p={p}, m={m}, v={v}" + (f", placement {placement})" if placement else ")")
    assert shape in result.stdout
    # torch's order and ours for the same schedule take the same time on the same profile
    # (torch's name resolves to our method).
    assert _cost(result.stdout) == pytest.approx(_ours(p, m, v, placement, torch_name))
    timed = json.loads((tmp_path / "timed.json").read_text())
    assert timed["metrics"]["cost"] == _cost(result.stdout)
    assert (tmp_path / "timed.svg").read_text().startswith("<svg")


def test_zbv_dumped_by_torch_is_zero_bubble_under_equal_times(tmp_path: Path) -> None:
    csv = tmp_path / "zbv.csv"
    torch_side.dump_torch_csv("ZBVZeroBubble", 4, 8, csv)
    result = ppsched("import-csv", str(csv))  # unit times: T_F = T_B = T_W
    assert result.returncode == 0, result.stderr
    assert "bubble rate  0.0000" in result.stdout


def test_torch_1f1b_csv_shows_its_last_rank_off_by_one(tmp_path: Path) -> None:
    # torch 2.13's Schedule1F1B._get_pipeline_order starts the last rank's forwards at
    # microbatch 1 (forward_mb += 1 before the first F when there is no warm-up), so its
    # CSV runs 3F1..3F8 and never 3F0. The simulator says so, naming both.
    csv = tmp_path / "1f1b.csv"
    torch_side.dump_torch_csv("1F1B", 4, 8, csv)
    result = ppsched("simulate", str(csv), "--microbatches", "8")
    assert result.returncode == 1
    assert "INVALID, 2 violations" in result.stdout
    assert "[unknown_op] 3F8 at rank 3" in result.stdout
    assert "[missing] 3F0 (rank 3)" in result.stdout


# (method, v, placement): split backward (I and W), V placement, loop placement.
ROUND_TRIPS = [("zb-h1", 1, None), ("zb-v", 2, "v"), ("1f1b-interleaved", 2, "loop"),
               ("heuristic", 2, "v")]


@pytest.mark.dist
@pytest.mark.parametrize(("method", "v", "placement"), ROUND_TRIPS,
                         ids=[f"{m}-v{v}" for m, v, _ in ROUND_TRIPS])
def test_our_csv_runs_under_torchs_runtime_with_exact_gradients(
        method: str, v: int, placement: str | None, tmp_path: Path) -> None:
    p, m = 2, 4
    data: dict[str, Any] = {**json.loads(UNIFORM.read_text()), "num_ranks": p,
                            "num_microbatches": m, "num_chunks": v, "placement": placement}
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps(data))
    csv = tmp_path / "ours.csv"
    solved = ppsched("solve", str(profile), "--method", method, "--csv", str(csv))
    assert solved.returncode == 0, solved.stderr
    stage_to_rank = list(parse_profile(data).problem.stage_to_rank)
    reports = launch_local(torch_side.run_csv, p, str(csv), p * v, m, stage_to_rank,
                           timeout_s=300)
    held = sorted(s for report in reports for s in report["stages"])
    assert held == list(range(p * v))
    for report in reports:
        assert report["errors"], report
        for name, error in report["errors"].items():
            assert error <= 1e-12, (name, error)  # float64: equal up to rounding
    losses = [r["loss"] for r in reports if r["loss"] is not None]
    assert len(losses) == 1
    assert losses[0] == pytest.approx(reports[0]["ref_loss"], rel=1e-12)
