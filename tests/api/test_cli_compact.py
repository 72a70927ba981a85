"""`ppsched solve --compact` writes one string of torch actions per rank; `simulate` and
`render` read it back and re-time it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.api.test_cli import ROOT, ppsched


def test_solve_compact_then_simulate(tmp_path: Path) -> None:
    profile = str(ROOT / "profiles" / "gpt1.5b-p8-m24.json")
    full, compact = tmp_path / "full.json", tmp_path / "compact.json"
    assert ppsched("solve", profile, "--layouts", "1,v", "-o", str(full)).returncode == 0
    result = ppsched("solve", profile, "--layouts", "1,v", "-o", str(compact), "--compact")
    assert result.returncode == 0, result.stderr
    data, reference = json.loads(compact.read_text()), json.loads(full.read_text())
    assert data["ops_encoding"] == "actions" and "ops_encoding" not in reference
    assert [len(rank.split(",")) for rank in data["ranks"]] == \
        [len(rank) for rank in reference["ranks"]]
    assert compact.stat().st_size * 5 < full.stat().st_size
    retimed = tmp_path / "retimed.json"
    result = ppsched("simulate", str(compact), "-o", str(retimed), "--svg",
                     str(tmp_path / "s.svg"))
    assert result.returncode == 0, result.stderr
    again = json.loads(retimed.read_text())
    assert again["ranks"] == reference["ranks"]  # the simulator's times, op for op
    assert again["metrics"]["cost"] == reference["metrics"]["cost"]
