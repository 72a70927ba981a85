"""`ppsched advise`: the ranked table from a YAML file, and one-line errors with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ppsched.api.cli import main

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


def test_vary_sweeps_fields(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", str(EXAMPLE), "--strategies", "1f1b,weipipe-interleave",
                 "--vary", "model.seq_len=4096,16384",
                 "--vary", "cluster.inter_node_gbps=1.25,25"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["model.seq_len", "cluster.inter_node_gbps", "1f1b",
                                "weipipe-interleave", "best"]
    rows = [line.split() for line in lines[2:]]
    assert [(r[0], r[1]) for r in rows] == [("4096", "1.25"), ("4096", "25"),
                                            ("16384", "1.25"), ("16384", "25")]
    for r in rows:  # the best is the faster of the two (both fit on 80 GB)
        best = max((float(r[2]), "1f1b"), (float(r[3]), "weipipe-interleave"))[1]
        assert r[4] == best


@pytest.mark.parametrize(("vary", "needle"), [
    ("model.seq_len", "'--vary': got 'model.seq_len'"),
    ("model.seq_len=0", "'model.seq_len': got 0"),
    ("model.x.y=1", "a field of the config"),
])
def test_bad_vary_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], vary: str,
                                     needle: str) -> None:
    assert main(["advise", str(EXAMPLE), "--vary", vary]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
