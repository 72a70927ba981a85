"""`ppsched torchtitan`: the CSV plus the torchtitan settings that must match it; one-line
errors naming the option."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from ppsched.api.cli import main
from ppsched.solver.integrations.torchtitan import torchtitan_stage_layers
from ppsched.solver.render.torch_csv import parse_torch_csv

ROOT = Path(__file__).resolve().parents[2]
GPT = str(ROOT / "profiles" / "gpt1.5b-p8-m24.json")


def _written(folder: Path) -> tuple[dict, dict, list]:
    toml = tomllib.loads((folder / "torchtitan.toml").read_text())
    settings = json.loads((folder / "torchtitan.json").read_text())
    orders = parse_torch_csv((folder / "schedule.csv").read_text())
    return toml, settings, orders


def test_one_stage_per_rank_with_layers_and_batch(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["torchtitan", GPT, "--layers", "22", "--local-batch-size", "48",
                 "--layouts", "1", "-o", str(tmp_path)]) == 0
    toml, settings, orders = _written(tmp_path)
    csv = str(tmp_path / "schedule.csv")
    assert toml["parallelism"] == {
        "pipeline_parallel_degree": 8, "pipeline_parallel_schedule": "PipelineScheduleSingle",
        "pipeline_parallel_schedule_csv": csv, "pipeline_parallel_layers_per_stage": 3,
        "pipeline_parallel_microbatch_size": 2}
    assert toml["training"] == {"local_batch_size": 48}  # 48 / 2 = m = 24 microbatches
    assert settings["parallelism.num_pp_microbatches"] == 24
    assert len(orders) == 8 and {op.stage for op in orders[3]} == {3}
    out = capsys.readouterr().out
    assert "transformer layers per stage (torchtitan's split): 2 3 3 3 3 3 3 2" in out


@pytest.mark.parametrize(("method", "extra", "schedule_class", "stages_of_rank_1"), [
    ("ZBVZeroBubble", ["--layouts", "v"], "ZBVZeroBubble", {1, 14}),
    ("InterleavedZeroBubble", [], "PipelineScheduleMulti", {1, 9}),
])
def test_two_chunks_name_the_class_of_their_placement(
        tmp_path: Path, method: str, extra: list[str], schedule_class: str,
        stages_of_rank_1: set[int]) -> None:
    assert main(["torchtitan", GPT, "-m", method, *extra, "--layers", "30",
                 "-o", str(tmp_path)]) == 0
    toml, settings, orders = _written(tmp_path)
    # torchtitan's V style gives rank r the stages (r, 2p - 1 - r), its loop style r + s p:
    # the CSV's stage-to-rank map must be the same.
    assert toml["parallelism"]["pipeline_parallel_schedule"] == schedule_class
    assert {op.stage for op in orders[1]} == stages_of_rank_1
    # ceil((30 + 2) / 2) = 16 stages = p * v
    assert settings["parallelism.pipeline_parallel_layers_per_stage"] == 2


def test_layer_split_follows_torchtitans_generator() -> None:
    # _generate_llm_fqn_per_model_part(16, 22): 24 effective layers, 8 stages of 2, 8 of 1
    assert torchtitan_stage_layers(16, 22) == (1,) + (2,) * 7 + (1,) * 7 + (0,)
    assert sum(torchtitan_stage_layers(8, 22)) == 22


@pytest.mark.parametrize(("args", "needle"), [
    (["--local-batch-size", "50"], "invalid '--local-batch-size': got 50; expected a "
     "positive multiple of num_microbatches = 24"),
    (["--layers", "3"], "invalid '--layers': got 3; expected at least 6 layers"),
    (["--layers", "0"], "argument --layers: got '0'; expected an integer >= 1"),
    (["-m", "LoopedBFS"], "invalid 'method': got 'LoopedBFS'"),
    (["-m", "1f1b-interleaved", "--layouts", "loop3", "--memory-limit", "none"],
     "invalid '--layers': got 'not given'; "
     "expected the model's layer count"),
])
def test_bad_input_is_one_named_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     args: list[str], needle: str) -> None:
    try:
        code = main(["torchtitan", GPT, *args, "-o", str(tmp_path)])
    except SystemExit as exc:  # argparse's own refusals exit from the parser
        code = int(str(exc.code))
    assert code == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1, err
    assert not (tmp_path / "torchtitan.toml").exists()


def test_missing_folder_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["torchtitan", GPT, "-o", str(tmp_path / "no")]) == 2
    assert "invalid '--output'" in capsys.readouterr().err


def test_the_default_layouts_are_those_torchtitan_can_split(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 22 layers split into 16 stages (the V cut wins at 1p), 12 layers do not (torchtitan
    # gives every stage a layer): the solver then keeps one chunk per rank.
    assert main(["torchtitan", GPT, "--layers", "22", "-o", str(tmp_path)]) == 0
    toml, _, _ = _written(tmp_path)
    assert toml["parallelism"]["pipeline_parallel_schedule"] == "ZBVZeroBubble"
    assert main(["torchtitan", GPT, "--layers", "12", "-o", str(tmp_path)]) == 0
    toml, _, orders = _written(tmp_path)
    assert toml["parallelism"]["pipeline_parallel_schedule"] == "PipelineScheduleSingle"
    assert {op.stage for op in orders[3]} == {3}
