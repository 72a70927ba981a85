"""`ppsched weipipe`: figures, grid, SVG and JSON of a WeiPipe schedule; one-line errors."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ppsched.api.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "weipipe-p4.json"


def test_weipipe_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    svg, out = tmp_path / "w.svg", tmp_path / "w.json"
    assert main(["weipipe", str(EXAMPLE), "-m", "weipipe-zb2", "--grid", "--svg", str(svg),
                 "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("weipipe-zb2 on weipipe-p4-example: step time")
    assert "rank 3" in text
    data = json.loads(out.read_text())
    assert data["family"] == "weipipe" and len(data["ranks"]) == 4
    assert f"step time {data['metrics']['step_time']:.6g}" in text
    ET.fromstring(svg.read_text())  # well-formed


@pytest.mark.parametrize(("args", "needle"), [
    (["-m", "weipipe-fast"], "'method': got 'weipipe-fast'"),
    (["-o", "/nonexistent/dir/x.json"], "'output'"),
])
def test_weipipe_errors(capsys: pytest.CaptureFixture[str], args: list[str],
                        needle: str) -> None:
    assert main(["weipipe", str(EXAMPLE), *args]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_weipipe_bad_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    data = json.loads(EXAMPLE.read_text())
    data["bandwidth"] = [1.0, 1.0]
    bad.write_text(json.dumps(data))
    assert main(["weipipe", str(bad)]) == 2
    assert "'bandwidth'" in capsys.readouterr().err
