"""The `ppsched` command line, run as a user runs it: a subprocess, files on disk."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ppsched.solver.model.schedule import parse_schedule
from ppsched.solver.render.torch_csv import parse_torch_csv
from ppsched.solver.sim.simulator import simulate

ROOT = Path(__file__).resolve().parents[2]
PROFILES = sorted((ROOT / "profiles").glob("*.json"))


def ppsched(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ppsched.api.cli", *args], capture_output=True,
                          text=True, cwd=cwd or ROOT, timeout=120)


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_solve_writes_valid_schedule_and_views(profile: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    svg, trace, csv = tmp_path / "s.svg", tmp_path / "t.json", tmp_path / "s.csv"
    result = ppsched("solve", str(profile), "-o", str(out), "--svg", str(svg), "--trace",
                     str(trace), "--csv", str(csv))
    assert result.returncode == 0, result.stderr
    for word in ("method", "cost", "bubble rate", "peak memory", "lower bound", "gap",
                 "wall time"):
        assert word in result.stdout
    schedule = parse_schedule(json.loads(out.read_text()))
    sim = simulate(schedule.profile.problem, schedule.orders())
    assert sim.ok and sim.metrics is not None
    assert schedule.metrics is not None
    assert sim.metrics.cost == pytest.approx(schedule.metrics.cost, abs=1e-9)
    assert ET.fromstring(svg.read_text()).tag.endswith("svg")
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) == sum(map(len, schedule.ranks))
    assert parse_torch_csv(csv.read_text()) == schedule.orders()


def test_simulate_reports_a_cyclic_schedule_as_deadlock(tmp_path: Path) -> None:
    # Rank 0 waits for the gradient of microbatch 0 before sending F1; rank 1 wants F1
    # before it sends that gradient: neither can move.
    profile = json.loads((ROOT / "profiles" / "uniform-p4-m8.json").read_text())
    profile.update(num_ranks=2, num_microbatches=2)
    ops = {0: ["F0", "B0", "F1", "W0", "B1", "W1"], 1: ["F0", "F1", "B0", "W0", "B1", "W1"]}
    ranks = [[{"kind": op[0], "stage": r, "microbatch": int(op[1])} for op in ops[r]]
             for r in (0, 1)]
    path = tmp_path / "cyclic.json"
    path.write_text(json.dumps({"profile": profile, "ranks": ranks}))
    result = ppsched("simulate", str(path))
    assert result.returncode == 1
    assert "deadlock" in result.stdout
    assert "0B0" in result.stdout and "1F1" in result.stdout
    assert "<-- ERROR HERE" in result.stdout


def test_simulate_retimes_a_hand_written_schedule(tmp_path: Path) -> None:
    profile = json.loads((ROOT / "profiles" / "uniform-p4-m8.json").read_text())
    profile.update(num_ranks=2, num_microbatches=1)
    ranks = [[{"kind": "F", "stage": 0, "microbatch": 0}, {"kind": "B", "stage": 0,
              "microbatch": 0}, {"kind": "W", "stage": 0, "microbatch": 0}],
             [{"kind": "F", "stage": 1, "microbatch": 0}, {"kind": "BW", "stage": 1,
              "microbatch": 0}]]
    path = tmp_path / "hand.json"
    path.write_text(json.dumps({"profile": profile, "ranks": ranks}))
    out = tmp_path / "timed.json"
    result = ppsched("simulate", str(path), "-o", str(out))
    assert result.returncode == 0, result.stderr
    timed = json.loads(out.read_text())
    # F0 [0,1], F1 [1,2], BW1 [2,4], B0 [4,5], W0 [5,6]: rank 0's span is 6.
    assert timed["metrics"]["cost"] == 6.0
    assert timed["ranks"][0][1]["start"] == 4.0


@pytest.mark.parametrize(("change", "field"), [
    ({"m_w": -1.0}, "m_w"),
    ({"t_f": [1.0, 2.0]}, "t_f"),
    ({"t_b": -1}, "t_b"),
    ({"memory_limit": 0.5}, "memory_limit"),
    ({"bogus": 1}, "bogus"),
])
def test_bad_profile_is_one_line_and_exit_2(change: dict[str, object], field: str,
                                            tmp_path: Path) -> None:
    profile = json.loads((ROOT / "profiles" / "uniform-p4-m8.json").read_text())
    profile.update(change)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(profile))
    result = ppsched("solve", str(path))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"'{field}'" in lines[0] and "Traceback" not in result.stderr


@pytest.mark.parametrize("args", [
    ("solve", "missing.json"),
    ("solve", "profiles/uniform-p4-m8.json", "--method", "nope"),
    ("solve", "profiles/gpt1.5b-p8-m24.json", "--method", "zb-h2"),
    ("render", "profiles/uniform-p4-m8.json", "--grid"),
])
def test_errors_are_one_line(args: tuple[str, ...]) -> None:
    result = ppsched(*args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith("ppsched: error:")


def test_invalid_json_names_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"num_ranks": 2,\n "t_f": }')
    result = ppsched("solve", str(path))
    assert result.returncode == 2 and "line 2" in result.stderr


def test_memory_limit_override_and_render_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    result = ppsched("solve", "profiles/gpt1.5b-p8-m24.json", "--memory-limit", "16",
                     "-o", str(out))
    assert result.returncode == 0, result.stderr
    schedule = parse_schedule(json.loads(out.read_text()))
    assert schedule.profile.memory_limit == 16
    assert schedule.metrics is not None and max(schedule.metrics.peak_memory) <= 16
    svg = tmp_path / "r.svg"
    result = ppsched("render", str(out), "--svg", str(svg), "--grid")
    assert result.returncode == 0, result.stderr
    assert svg.exists() and "rank 7 |" in result.stdout


def test_methods_and_schemas() -> None:
    result = ppsched("methods")
    assert result.returncode == 0
    for name in ("heuristic", "1f1b", "gpipe", "zb-h1", "zb-h2"):
        assert name in result.stdout
    for which in ("profile", "schedule"):
        schema = json.loads(ppsched("schema", which).stdout)
        assert schema["type"] == "object"
    profile_schema = json.loads(ppsched("schema", "profile").stdout)
    assert {"t_f", "t_b", "t_w", "m_b", "m_w", "memory_limit"} <= set(
        profile_schema["properties"])


def test_ilp_shows_progress_and_final_status(tmp_path: Path) -> None:
    out = tmp_path / "ilp.json"
    # One chunk per rank (the V cut, which the default also considers, does better here
    # and is not proven optimal).
    result = ppsched("solve", "profiles/gpt1.5b-p8-m24.json", "--memory-limit", "16",
                     "--method", "ilp", "--time-limit", "10", "--layouts", "1",
                     "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "best 1152.3000" in result.stderr and "bound" in result.stderr  # progress
    assert "ilp-cpsat (optimal)" in result.stdout
    # The model's bound holds over FIFO orders only: shown apart, with its scope.
    assert "solver bound 1152.3000   (gap 0.00%) over FIFO orders" in result.stdout
    schedule = json.loads(out.read_text())
    assert schedule["solver"]["status"] == "optimal"
    assert schedule["solver"]["backend"] == "cpsat" and schedule["solver"]["fifo"] is True
    assert schedule["solver"]["bound"] == pytest.approx(schedule["metrics"]["cost"])
    assert schedule["solver"]["bound_scope"].startswith("FIFO orders")
    # metrics.lower_bound holds over every schedule: here below the FIFO optimum.
    assert schedule["metrics"]["lower_bound"] < schedule["metrics"]["cost"]


@pytest.mark.parametrize("args", [
    ("--backend", "gurobi-please"),
    ("--time-limit", "0"),
    ("--workers", "0"),
    ("--time-limit", "soon"),
])
def test_bad_ilp_options_are_one_line(args: tuple[str, ...]) -> None:
    result = ppsched("solve", "profiles/uniform-p4-m8.json", "--method", "ilp", *args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
