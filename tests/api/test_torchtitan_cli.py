"""`ppsched torchtitan`: the CSV plus the torchtitan 0.3.0 flags that must match it; one-line
errors naming the option; a separate W on the last stage refused without --unchunked-loss
(tests/interop/test_torchtitan_last_stage.py shows why)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ppsched.api.cli import main
from ppsched.solver.integrations.torchtitan import torchtitan_stage_layers
from ppsched.solver.render.torch_csv import parse_torch_csv

ROOT = Path(__file__).resolve().parents[2]
GPT = str(ROOT / "profiles" / "gpt1.5b-p8-m24.json")


def _written(folder: Path) -> tuple[list[str], dict, list]:
    lines = (folder / "torchtitan.args").read_text().splitlines()
    settings = json.loads((folder / "torchtitan.json").read_text())
    orders = parse_torch_csv((folder / "schedule.csv").read_text())
    return [line for line in lines if not line.startswith("#")], settings, orders


def test_one_stage_per_rank_with_layers_and_batch(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["torchtitan", GPT, "--layers", "22", "--local-batch-size", "48",
                 "--layouts", "1", "--unchunked-loss", "-o", str(tmp_path)]) == 0
    args, settings, orders = _written(tmp_path)
    csv = str(tmp_path / "schedule.csv")
    # 48 / 2 = m = 24 microbatches; the heuristic splits W, so checkpointing goes off.
    assert args == [
        "--parallelism.pipeline_parallel_degree=8",
        "--parallelism.pipeline_parallel_schedule=PipelineScheduleSingle",
        f"--parallelism.pipeline_parallel_schedule_csv={csv}",
        "--parallelism.pipeline_parallel_layers_per_stage=3",
        "--parallelism.pipeline_parallel_microbatch_size=2",
        "--training.local_batch_size=48", "--training.disable_cuda_graphs",
        "activation-checkpoint:none"]
    assert settings["parallelism.pipeline_parallel_microbatch_size"] == 2
    assert settings["training.local_batch_size"] == 48
    assert settings["training.disable_cuda_graphs"] is True
    assert not any("num_pp_microbatches" in key for key in settings)
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
                 "--unchunked-loss", "-o", str(tmp_path)]) == 0
    _, settings, orders = _written(tmp_path)
    # torchtitan's V style gives rank r the stages (r, 2p - 1 - r), its loop style r + s p:
    # the CSV's stage-to-rank map must be the same.
    assert settings["parallelism.pipeline_parallel_schedule"] == schedule_class
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
    assert not (tmp_path / "torchtitan.args").exists()


def test_missing_folder_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["torchtitan", GPT, "-o", str(tmp_path / "no")]) == 2
    assert "invalid '--output'" in capsys.readouterr().err


def test_the_default_layouts_are_those_torchtitan_can_split(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 22 layers split into 16 stages (the V cut wins at 1p), 12 layers do not (torchtitan
    # gives every stage a layer): the solver then keeps one chunk per rank.
    common = ["--unchunked-loss", "-o", str(tmp_path)]
    assert main(["torchtitan", GPT, "--layers", "22", *common]) == 0
    _, settings, _ = _written(tmp_path)
    assert settings["parallelism.pipeline_parallel_schedule"] == "ZBVZeroBubble"
    assert main(["torchtitan", GPT, "--layers", "12", *common]) == 0
    _, settings, orders = _written(tmp_path)
    assert settings["parallelism.pipeline_parallel_schedule"] == "PipelineScheduleSingle"
    assert {op.stage for op in orders[3]} == {3}


def test_fused_backward_keeps_checkpointing_and_needs_no_flag(tmp_path: Path) -> None:
    assert main(["torchtitan", GPT, "-m", "1f1b", "--layouts", "1", "-o", str(tmp_path)]) == 0
    args, _, _ = _written(tmp_path)
    assert args[-1] == "--training.disable_cuda_graphs"  # no activation-checkpoint:none


def test_a_split_last_stage_is_refused_without_unchunked_loss(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["torchtitan", GPT, "-m", "zb-h1", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ppsched: error: invalid 'method': got 'zb-h1'; expected a "
                          "schedule whose last stage runs a fused backward"), err
    assert "ChunkedLossWrapper" in err and "--unchunked-loss" in err
    assert not (tmp_path / "schedule.csv").exists()
