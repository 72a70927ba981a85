"""Picking an engine, and what ``engine="torch"`` refuses before any process group work
(the engines' results are in the correctness grid, test_grid.py)."""

from __future__ import annotations

import pytest
from ppsched.runtime_adapter import run
from ppsched.runtime_adapter.engines import make_engine
from ppsched.runtime_adapter.launch import launch_local
from ppsched.runtime_adapter.model import mse_loss
from ppsched.runtime_adapter.torch_engine import TorchPipelineEngine
from torch import nn

from tests.runtime_adapter import engine_side, workers


def test_an_unknown_engine_name_is_refused_naming_the_choices() -> None:
    schedule = workers.build_schedule("1f1b", 2, 4)
    with pytest.raises(ValueError, match=r"invalid 'engine': got 'tensorflow'; expected "
                                         r"one of ppsched, torch"):
        make_engine("tensorflow", schedule, {0: nn.Linear(2, 2)}, mse_loss)


def test_torch_engine_refuses_a_timeout_it_could_not_honour() -> None:
    schedule = workers.build_schedule("1f1b", 2, 4)
    with pytest.raises(ValueError, match=r"invalid 'timeout_s' for engine='torch'.*"
                                         r"init_process_group\(timeout=...\)"):
        make_engine("torch", schedule, {0: nn.Linear(2, 2)}, mse_loss, timeout_s=5)


def test_torch_engine_refuses_recompute_and_offload_ops() -> None:
    # torch's CSV has no R, O or L action: running the schedule without them would keep
    # every activation, which is not the schedule that was solved.
    schedule = workers.build_schedule(workers.POLICIES_BY_HAND, 2, 4)
    with pytest.raises(ValueError, match=r"invalid 'schedule': it holds R/O/L ops that "
                                         r"engine='torch' cannot run \(torch CSV drops .*"
                                         r"expected .* or engine='ppsched'"):
        TorchPipelineEngine(schedule, {0: nn.Linear(2, 2)}, mse_loss)


def test_run_command_refuses_a_trace_from_the_torch_engine(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = run.main(["--method", "zb-h1", "--engine", "torch", "--trace", "t.json"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines() == [
        "ppsched.runtime_adapter.run: error: --trace/--report need --engine ppsched; got --engine "
        "torch, whose runtime records no per-op times"]


@pytest.mark.dist
def test_torch_default_grad_scaling_divides_a_weight_shared_by_two_stages_twice() -> None:
    # Why the torch engine scales the loss by 1/m with scale_grads=False: under the V
    # placement rank 0 holds the tied embedding's stage 0 and the head's stage 3, one
    # Parameter; torch 2.13's REDUCE_GRAD runs stage.scale_grads(m) per stage
    # (torch/distributed/pipelining/stage.py, perform_reduce_grad), so that gradient is
    # divided by m again after the first stage's division (measured: 0.7497 relative
    # error at m = 4, near 1 - 1/m; rank 1 shares no weight between its stages).
    per_rank = launch_local(engine_side.torch_default_grad_scaling, 2, "zb-v",
                            timeout_s=200)
    assert per_rank[0]["grad"] > 0.5, per_rank
    assert per_rank[1]["grad"] <= 1e-5, per_rank  # no weight shared between its stages
