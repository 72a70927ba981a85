"""The CLI's torch CSV of a schedule with activation policies (DESIGN.md 6.3): R/O/L
dropped, with a note on stderr saying so (the service's header: tests/api/service)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from ppsched.solver.model.offload_sizing import with_offload
from ppsched.solver.model.profile import load_profile
from ppsched.solver.model.schedule import parse_schedule
from ppsched.solver.render.torch_csv import parse_torch_csv

ROOT = Path(__file__).resolve().parents[2]


def _offload_profile() -> dict[str, Any]:
    """gpt1.5b-p8-m24 with offload at k = 0.5 and half of 1F1B's memory: the solver must
    offload to fit."""
    profile = with_offload(load_profile(ROOT / "profiles" / "gpt1.5b-p8-m24.json"), 0.5)
    data: dict[str, Any] = profile.model_dump(mode="json")
    data["memory_limit"] = 0.5 * profile.num_ranks * profile.problem.m_b[0]
    return data


def test_cli_csv_drops_copies_with_a_note(tmp_path: Path) -> None:
    source = tmp_path / "p.json"
    source.write_text(json.dumps(_offload_profile()))
    out, csv = tmp_path / "s.json", tmp_path / "s.csv"
    result = subprocess.run([sys.executable, "-m", "ppsched.api.cli", "solve", str(source), "-o",
                             str(out), "--csv", str(csv), "--layouts", "1"],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    schedule = parse_schedule(json.loads(out.read_text()))
    offloads = sum(op.kind == "O" for rank in schedule.ranks for op in rank)
    assert offloads > 0
    assert f"ppsched: note: {csv}: torch CSV drops {offloads} O, {offloads} L ops" \
        in result.stderr
    assert parse_torch_csv(csv.read_text()) == [
        [op for op in ops if op.kind not in ("R", "O", "L")] for ops in schedule.orders()]
