"""`ppsched partition LAYERS.json -o OUT.json`: the best cut's validated schedule, the
cuts compared and torchtitan's module_fqns_per_model_part; one-line errors."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from ppsched.api.cli import main
from ppsched.solver.model import parse_schedule

ROOT = Path(__file__).resolve().parents[2]
LLAMA = str(ROOT / "profiles" / "layers" / "llama3-8b-p4-m16.json")


def test_writes_the_best_cut_and_prints_the_comparison(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "best.json"
    assert main(["partition", LLAMA, "-o", str(out), "--csv", str(tmp_path / "s.csv")]) == 0
    data = json.loads(out.read_text())
    schedule = parse_schedule(data)  # validated again by the simulator on reading
    counts = schedule.profile.layers_per_stage
    assert counts is not None and sum(counts) == 35 and len(counts) == 4
    names = schedule.profile.stage_layers
    assert names is not None and names[0][0] == "tok_embeddings" and names[-1][-1] == "lm_head"
    record = data["partition"]
    assert record["lower_bound"] <= schedule.metrics.makespan
    assert [c["cut"] for c in record["compared"]] == ["ppsched", "even split", "torchtitan",
                                                       "Megatron first/last"]
    assert all(record["compared"][0]["step_time"] <= c["step_time"]
               for c in record["compared"])
    printed = capsys.readouterr().out
    for label in ("even split", "torchtitan", "Megatron first/last", "lower bound"):
        assert label in printed
    recipe = printed[printed.index("[parallelism]"):].split("\n(")[0]
    parsed = tomllib.loads(recipe)["parallelism"]
    assert parsed["module_fqns_per_model_part"] == names
    assert (tmp_path / "s.csv").is_file()


@pytest.mark.parametrize(("layers", "words"), [
    ({"num_ranks": 2, "num_microbatches": 4,
      "layers": [{"name": "a", "t_f": 1, "t_b": 1, "t_w": 1, "m_b": 1, "m_w": 1},
                 {"name": "b", "t_f": 1, "t_w": 1, "m_b": 1, "m_w": 1}]},
     "invalid 'layers[1].t_b': got nothing (the field is missing)"),
    ({"num_ranks": 2, "num_microbatches": 4, "memory_limit": 1.5,
      "layers": [{"name": "a", "t_f": 1, "t_b": 1, "t_w": 1, "m_b": 1, "m_w": 1},
                 {"name": "b", "t_f": 1, "t_b": 1, "t_w": 1, "m_b": 2, "m_w": 1}]},
     "invalid 'memory_limit'"),
])
def test_bad_input_is_one_line_naming_the_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], layers: dict,
        words: str) -> None:
    path = tmp_path / "layers.json"
    path.write_text(json.dumps(layers))
    assert main(["partition", str(path), "-o", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "out.json").exists()


def test_overrides_reach_the_cut_profile(tmp_path: Path) -> None:
    out = tmp_path / "best.json"
    assert main(["partition", LLAMA, "-o", str(out), "--memory-limit", "17",
                 "--microbatches", "8", "--candidates", "4"]) == 0
    schedule = parse_schedule(json.loads(out.read_text()))
    assert schedule.profile.memory_limit == 17.0 and schedule.profile.num_microbatches == 8
    assert max(schedule.metrics.peak_memory) <= 17.0
    # The budget bounds the cuts listed by bound; the rules' cuts are judged besides.
    record = json.loads(out.read_text())["partition"]
    distinct = {tuple(c["layers_per_stage"]) for c in record["compared"]}
    assert record["judged"] >= len(distinct)


def test_a_bad_option_value_is_one_line(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["partition", LLAMA, "-o", str(tmp_path / "x.json"), "--candidates", "0"])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--candidates" in err and "'0'" in err
