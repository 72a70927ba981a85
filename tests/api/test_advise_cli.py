"""`ppsched advise`: the ranked table from a YAML file, and one-line errors with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "advise-llama-16gpu.yaml"


def test_example_prints_a_ranked_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("llama-h4096-s16k: 32 layers")
    rows = [line.split() for line in out[2:] if line.split()[0].isdigit()]
    assert {r[1] for r in rows} >= {"1f1b", "zb-1p", "zb-2p", "fsdp", "weipipe-interleave"}
    fits = [r[5] for r in rows]
    assert fits == sorted(fits, key=lambda x: x != "yes")  # what fits comes first
    times = [float(r[2]) for r in rows if r[5] == "yes"]
    assert times == sorted(times)


def test_json_output_and_strategy_subset(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", str(EXAMPLE), "--json", "--strategies", "1f1b,weipipe-zb1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert sorted(c["strategy"] for c in data) == ["1f1b", "weipipe-zb1"]
    assert all(c["step_time_s"] > 0 and c["peak_memory_gb"] > 0 for c in data)


@pytest.mark.parametrize(("text", "needle"), [
    ("model: {layers: 0}\n", "'model.layers': got 0"),
    ("model: [\n", "valid YAML (line 2"),
    ("- 1\n", "'config'"),
])
def test_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      text: str, needle: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    assert main(["advise", str(bad)]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_unknown_strategy_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", str(EXAMPLE), "--strategies", "1f1b,zb-9"]) == 2
    assert "'strategies[1]': got 'zb-9'" in capsys.readouterr().err


def test_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", "/nonexistent/model.yaml"]) == 2
    assert "readable YAML file" in capsys.readouterr().err
