"""`ppsched advise`: the ranked table from a YAML file, and one-line errors with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ppsched.api.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "advise-llama-16gpu.yaml"


def test_example_prints_a_ranked_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", str(EXAMPLE), "--sensitivity-runs", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("llama-h4096-s16k: 32 layers")
    rows = [line.split() for line in out[2:] if line.split()[0].isdigit()]
    assert {r[1] for r in rows} >= {"1f1b", "zb-1p", "zb-2p", "fsdp", "weipipe-interleave"}
    fits = [r[5] for r in rows]
    assert fits == sorted(fits, key=lambda x: x != "yes")  # what fits comes first
    times = [float(r[2]) for r in rows if r[5] == "yes"]
    assert times == sorted(times)
    # every assumption follows the table, with where it came from
    start = out.index("assumptions (value, from where; set any with --set FIELD=VALUE):")
    listed = {line.split()[0]: line.split()[-1] for line in out[start + 1:]}
    assert listed["cluster.mfu"] == "(config)" and listed["alpha"] == "(default)"
    assert not any(line.startswith("sensitivity") for line in out)


def test_json_output_and_strategy_subset(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", str(EXAMPLE), "--json", "--strategies", "1f1b,weipipe-zb1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert sorted(c["strategy"] for c in data["ranked"]) == ["1f1b", "weipipe-zb1"]
    assert all(c["step_time_s"] > 0 and c["peak_memory_gb"] > 0 for c in data["ranked"])
    assert data["winner"] == data["ranked"][0]["strategy"]
    fields = {a["field"]: a for a in data["assumptions"]}
    assert fields["num_microbatches"]["value"] == 64
    assert fields["num_microbatches"]["source"] == "config"
    sens = data["sensitivity"]
    assert sens["winner"] == data["winner"] and sens["runs"] <= sens["max_runs"]
    assert {i["field"] for i in sens["items"]} >= {"num_microbatches", "cluster.mfu",
                                                   "recompute[1f1b]"}


def test_set_overrides_a_field_and_is_marked(capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    assert main(["advise", str(EXAMPLE), "--json", "--strategies", "1f1b,fsdp",
                 "--sensitivity-runs", "0", "--set", "fsdp_overlap=true",
                 "--set", "cluster.mfu=0.35"]) == 0
    data = json.loads(capsys.readouterr().out)
    fields = {a["field"]: a for a in data["assumptions"]}
    assert fields["fsdp_overlap"] == {**fields["fsdp_overlap"], "value": True,
                                      "source": "--set"}
    assert fields["cluster.mfu"]["value"] == 0.35 and fields["cluster.mfu"]["source"] == "--set"
    assert data["sensitivity"] is None
    # the same answer as a config file that says so (there, the source reads 'config')
    text = EXAMPLE.read_text().replace("fsdp_overlap: false", "fsdp_overlap: true")
    text = text.replace("mfu: 0.5 ", "mfu: 0.35")
    assert "fsdp_overlap: true" in text and "mfu: 0.35" in text
    (tmp_path / "set.yaml").write_text(text)
    assert main(["advise", str(tmp_path / "set.yaml"), "--json", "--strategies",
                 "1f1b,fsdp", "--sensitivity-runs", "0"]) == 0
    edited = json.loads(capsys.readouterr().out)
    assert edited["ranked"] == data["ranked"]
    assert {a["field"]: a["source"] for a in edited["assumptions"]}["cluster.mfu"] == "config"
    # and not the example's own answer
    assert main(["advise", str(EXAMPLE), "--json", "--strategies", "1f1b,fsdp",
                 "--sensitivity-runs", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["ranked"] != data["ranked"]


def test_sensitivity_lines_follow_the_assumptions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", str(EXAMPLE), "--strategies", "1f1b,fsdp,weipipe-interleave"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("sensitivity: the pick weipipe-interleave flips with")
    line = next(x for x in out if x.split()[:1] == ["fsdp_overlap"] and "set to" in x)
    assert "set to true: fsdp wins" in line
    line = next(x for x in out if x.split()[:1] == ["cluster.inter_node_gbps"]
                and "holds at" in x)
    assert "up to 12.5: fsdp wins at" in line


@pytest.mark.parametrize(("argv", "needle"), [
    (["--set", "cluster.mfu"], "'--set': got 'cluster.mfu'"),
    (["--set", "cluster.mfu=2"], "'cluster.mfu': got 2"),
    (["--set", "model.layers.x=1"], "a field of the config"),
])
def test_bad_set_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str],
                                    needle: str) -> None:
    assert main(["advise", str(EXAMPLE), *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


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
