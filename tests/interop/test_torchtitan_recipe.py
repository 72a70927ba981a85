"""The flags `ppsched torchtitan` writes are accepted by torchtitan 0.3.0's own config
parsing (its `ConfigManager`, tyro), with the values they name, and the layer split
torchtitan derives from them is the one ppsched prints.

torchtitan is optional and not in CI (its import pulls triton, about 1 GB): ``pip install
--no-deps torchtitan==0.3.0`` plus what it imports; without it these tests skip, and
``PPSCHED_REQUIRE_TORCHTITAN=1`` turns the skip into a failure.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ppsched.api.cli import main

ROOT = Path(__file__).resolve().parents[2]
UNIFORM = ROOT / "profiles" / "uniform-p4-m8.json"
REQUIRE = "PPSCHED_REQUIRE_TORCHTITAN"


def _torchtitan(name: str) -> ModuleType:
    """Import a torchtitan module: skip without it, fail where the run requires it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        message = (f"torchtitan 0.3.0 cannot be imported ({exc}): pip install --no-deps "
                   "torchtitan==0.3.0 plus what it imports (docs/running.md)")
        if os.environ.get(REQUIRE, "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail(f"{REQUIRE} is set: {message}")
        pytest.skip(message)


def _solve(tmp_path: Path, method: str, *extra: str) -> list[str]:
    data: dict[str, Any] = {**json.loads(UNIFORM.read_text()), "num_ranks": 2,
                            "num_microbatches": 4, "num_chunks": 1, "placement": None}
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps(data))
    out = tmp_path / method
    assert main(["torchtitan", str(profile), "-m", method, "--layers", "6",
                 "--local-batch-size", "8", "-o", str(out), "--mkdir", *extra]) == 0
    lines = (out / "torchtitan.args").read_text().splitlines()
    return [line for line in lines if not line.startswith("#")]


@pytest.mark.parametrize(("method", "extra", "split"), [
    ("1f1b", (), False), ("zb-h1", ("--unchunked-loss",), True)])
def test_torchtitans_config_manager_accepts_the_flags(
        tmp_path: Path, method: str, extra: tuple[str, ...], split: bool) -> None:
    manager = _torchtitan("torchtitan.config.manager")
    pipeline = _torchtitan("torchtitan.distributed.pipeline_parallel")
    args = _solve(tmp_path, method, *extra)
    config = manager.ConfigManager().parse_args(
        ["--module", "llama3", "--config", "llama3_debugmodel", *args])
    par, training = config.parallelism, config.training
    assert par.pipeline_parallel_degree == 2
    assert par.pipeline_parallel_schedule_csv == str(tmp_path / method / "schedule.csv")
    assert (training.local_batch_size, par.pipeline_parallel_microbatch_size) == (8, 2)
    assert training.disable_cuda_graphs
    # Split backward: activation checkpointing off (the default selective one cannot run a
    # separate W); fused: torchtitan's default stays.
    assert (config.activation_checkpoint is None) == split
    # torchtitan's own split of the debug model's 6 layers into the recipe's stages.
    layers = len(config.model_spec.model.layers)
    stages = -(-(layers + 2) // par.pipeline_parallel_layers_per_stage)
    assert stages == 2
    split_of = pipeline._generate_llm_fqn_per_model_part(stages, layers)
    assert [sum(name.startswith("layers.") for name in part) for part in split_of] == [3, 3]


def test_without_disable_cuda_graphs_torchtitan_refuses_pp(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Why the recipe carries --training.disable_cuda_graphs: 0.3.0 refuses PP without it
    # (tyro reports the ValueError of Trainer.Config.__post_init__ and exits).
    manager = _torchtitan("torchtitan.config.manager")
    args = [a for a in _solve(tmp_path, "1f1b") if a != "--training.disable_cuda_graphs"]
    with pytest.raises(SystemExit):
        manager.ConfigManager().parse_args(
            ["--module", "llama3", "--config", "llama3_debugmodel", *args])
    captured = capsys.readouterr()
    assert "CUDA graphs do not support pipeline parallelism" in captured.out + captured.err
