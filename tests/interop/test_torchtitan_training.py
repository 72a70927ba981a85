"""torchtitan 0.3.0's own training loop with ppsched's CSVs: its `Trainer`, built by its
`ConfigManager` from ``--module llama3 --config llama3_debugmodel[_ce_loss]`` plus the flags
`ppsched torchtitan` writes, trains the debug model (6 layers, 2 stages) for two steps on
two gloo ranks on CPU, and every parameter's gradient (as the optimizer gets it), the loss
and the grad norm are compared with torchtitan's own 1F1B (no CSV) from the same seed:

- ppsched's 1F1B CSV under the default config (chunked loss, selective activation
  checkpointing, bf16 FSDP2 compute): bit-identical;
- ppsched's ZB-H1 CSV: refused by `ppsched torchtitan` for the chunked loss, with its
  reason; run anyway, the final norm's weight is left without a gradient (what the refusal
  prevents); with ``--unchunked-loss`` under torchtitan's unchunked config
  (``llama3_debugmodel_ce_loss``) and fp32 compute: bit-identical.

The CPU and missing-asset shims are in `tests/interop/titan_train.py`, each named with why.
torchtitan is optional and not in CI: without it these tests skip, and
``PPSCHED_REQUIRE_TORCHTITAN=1`` turns the skip into a failure (test_torchtitan_recipe.py).
About five minutes of wall time on two cores: five two-rank trainings.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from ppsched.api.cli import main
from ppsched.runtime_adapter.launch import launch_local

from tests.interop import titan_train
from tests.interop.test_torchtitan_recipe import _torchtitan

ROOT = Path(__file__).resolve().parents[2]
UNIFORM = ROOT / "profiles" / "uniform-p4-m8.json"
STEPS = 2
CHUNKED, UNCHUNKED = "llama3_debugmodel", "llama3_debugmodel_ce_loss"
# torchtitan's own 1F1B: the same stages, microbatches and batch as the recipe's (m = 4).
TITANS_1F1B = ("--parallelism.pipeline_parallel_degree=2",
               "--parallelism.pipeline_parallel_schedule=1F1B",
               "--parallelism.pipeline_parallel_microbatch_size=2",
               "--training.local_batch_size=8", "--training.disable_cuda_graphs")
# bf16 compute rounds a weight gradient differently when W runs apart from I (torch's split
# backward), so the split-W comparison computes in fp32, where it must be exact.
FP32 = ("--training.mixed_precision_param=float32",)

pytestmark = [pytest.mark.dist, pytest.mark.slow]


def _profile(folder: Path) -> Path:
    data: dict[str, Any] = {**json.loads(UNIFORM.read_text()), "num_ranks": 2,
                            "num_microbatches": 4, "num_chunks": 1, "placement": None}
    path = folder / "profile.json"
    path.write_text(json.dumps(data))
    return path


def _recipe(folder: Path, method: str, *extra: str) -> tuple[str, ...]:
    out = folder / method
    assert main(["torchtitan", str(_profile(folder)), "-m", method, "--layers", "6",
                 "--local-batch-size", "8", "-o", str(out), "--mkdir", *extra]) == 0
    lines = (out / "torchtitan.args").read_text().splitlines()
    return tuple(line for line in lines if not line.startswith("#"))


class Runs:
    """Each training run once per module (five cost minutes), keyed by what it runs."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.done: dict[tuple[str, tuple[str, ...]], list[dict[str, Any]]] = {}

    def recipe(self, method: str, *extra: str) -> tuple[str, ...]:
        return _recipe(self.folder, method, *extra)

    def train(self, config: str, flags: tuple[str, ...]) -> list[dict[str, Any]]:
        key = (config, flags)
        if key not in self.done:
            dump = self.folder / f"dump{len(self.done)}"
            self.done[key] = launch_local(titan_train.train, 2, config, list(flags),
                                          str(dump), STEPS, timeout_s=900)
        return self.done[key]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    _torchtitan("torchtitan.config.manager")
    return Runs(tmp_path_factory.mktemp("titan"))


def _differences(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> list[str]:
    """What differs between two runs, rank by rank and step by step: a parameter set, a
    missing gradient, a gradient not bit-identical (with its relative error), the logged
    loss and grad norm."""
    out = []
    for rank, (g, w) in enumerate(zip(got, want, strict=True)):
        if g["logged"] != w["logged"]:
            out.append(f"rank {rank}: (loss, grad norm) {g['logged']} != {w['logged']}")
        for step, (gg, wg) in enumerate(zip(g["grads"], w["grads"], strict=True), 1):
            if gg.keys() != wg.keys():
                out.append(f"rank {rank} step {step}: parameters {sorted(gg.keys() ^ wg.keys())}")
                continue
            for name, want_grad in wg.items():
                grad = gg[name]
                if grad is None or want_grad is None:
                    out.append(f"rank {rank} step {step}: {name} gradient "
                               f"{'None' if grad is None else 'present'}, reference "
                               f"{'None' if want_grad is None else 'present'}")
                elif not torch.equal(grad, want_grad):
                    err = float((grad - want_grad).norm() / want_grad.norm())
                    out.append(f"rank {rank} step {step}: {name} relative error {err:.3g}")
    return out


def _check_shape(run: list[dict[str, Any]], schedule: str) -> None:
    assert [r["schedule"] for r in run] == [schedule, schedule]
    assert [(r["first"], r["last"]) for r in run] == [(True, False), (False, True)]
    assert all(len(r["grads"]) == STEPS and len(r["logged"]) == STEPS for r in run)
    # The last stage holds the final norm and lm_head; a loss is logged there only.
    assert {"norm.weight", "lm_head.weight"} <= run[1]["grads"][0].keys()
    assert all(loss > 0 for loss, _ in run[1]["logged"])


def test_ppsched_1f1b_csv_trains_exactly_as_torchtitans_1f1b(runs: Runs) -> None:
    want = runs.train(CHUNKED, TITANS_1F1B)
    got = runs.train(CHUNKED, runs.recipe("1f1b"))
    _check_shape(want, "Schedule1F1B")
    _check_shape(got, "_PipelineScheduleRuntime")  # the CSV path
    assert all(grad is not None for r in want for step in r["grads"] for grad in step.values())
    assert _differences(got, want) == []


def test_ppsched_refuses_zb_h1_under_the_chunked_loss(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["torchtitan", str(_profile(tmp_path)), "-m", "zb-h1", "--layers", "6",
                 "--local-batch-size", "8", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "invalid 'method': got 'zb-h1'" in err, err
    assert "ChunkedLossWrapper" in err and "final norm's weight gradient is lost" in err, err
    assert "--unchunked-loss" in err and "1f1b" in err, err
    assert not (tmp_path / "schedule.csv").exists()


def test_the_refused_csv_leaves_the_final_norm_untrained(runs: Runs) -> None:
    # Why the refusal: the same ZB-H1 CSV (written with --unchunked-loss) under the chunked
    # loss gives norm.weight no gradient at any step in torchtitan's own loop.
    want = runs.train(CHUNKED, TITANS_1F1B)
    got = runs.train(CHUNKED, runs.recipe("zb-h1", "--unchunked-loss"))
    _check_shape(got, "_PipelineScheduleRuntime")
    assert [step["norm.weight"] for step in got[1]["grads"]] == [None] * STEPS
    assert all(step["norm.weight"] is not None for step in want[1]["grads"])


def test_zb_h1_csv_with_an_unchunked_loss_trains_exactly_as_torchtitans_1f1b(
        runs: Runs) -> None:
    recipe = runs.recipe("zb-h1", "--unchunked-loss")
    assert recipe[-1] == "activation-checkpoint:none"  # the recipe's split-W setting
    want = runs.train(UNCHUNKED, FP32 + TITANS_1F1B)
    got = runs.train(UNCHUNKED, FP32 + recipe)
    _check_shape(want, "Schedule1F1B")
    _check_shape(got, "_PipelineScheduleRuntime")
    assert all(grad is not None for r in got for step in r["grads"] for grad in step.values())
    assert _differences(got, want) == []
