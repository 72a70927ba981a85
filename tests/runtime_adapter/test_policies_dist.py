"""Activation policies on real processes (gloo on CPU, DESIGN.md 6.3): recomputed and
offloaded activations give the unpipelined model's loss, gradients and Adam step."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from ppsched.runtime_adapter.launch import launch_local
from ppsched.runtime_adapter.stage import StageRunner
from ppsched.solver.sim.simulator import simulate
from torch import nn

from tests.runtime_adapter import workers

TOLERANCE = 1e-5  # relative, fp32, as in test_dist.py


def _kinds(schedule: Any) -> set[str]:
    return {op.kind for ops in schedule.orders() for op in ops}


@pytest.mark.parametrize("p", [2, 4])
def test_hand_built_policy_schedule_is_valid(p: int) -> None:
    schedule = workers.build_schedule(workers.POLICIES_BY_HAND, p, 4)
    assert {"R", "O", "L"} <= _kinds(schedule)
    assert simulate(schedule.profile.problem, schedule.orders()).ok


def test_the_solver_offloads_below_one_f_one_b() -> None:
    schedule = workers.build_schedule(workers.SOLVER_OFFLOAD, 2, 4)
    assert {"O", "L"} <= _kinds(schedule)


@pytest.mark.dist
@pytest.mark.parametrize(("method", "p"), [(workers.POLICIES_BY_HAND, 2),
                                           (workers.POLICIES_BY_HAND, 4),
                                           (workers.SOLVER_OFFLOAD, 2)])
def test_policy_step_equals_unpipelined_model(method: str, p: int) -> None:
    case = (method, 4, 1, None)
    results: list[Any] = launch_local(workers.equivalence, p, [case], timeout_s=300)
    per_rank = [rank[f"{method}-v1-None"] for rank in results]
    workers.assert_equals_unpipelined(per_rank, TOLERANCE)


def _runner(module: nn.Module) -> StageRunner:
    return StageRunner(0, module, is_last=False, loss_fn=nn.functional.mse_loss,
                       num_microbatches=1)


def test_recompute_draws_the_same_dropout_mask_and_gradients() -> None:
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 8))
    x = torch.randn(4, 8)
    grad = torch.randn(4, 8)
    results = {}
    for policy in ("keep", "recompute", "offload"):
        copy = nn.Sequential(*[type(m)(8, 8) if isinstance(m, nn.Linear) else m
                               for m in module])
        copy.load_state_dict(module.state_dict())
        runner = _runner(copy)
        torch.manual_seed(1)  # the same dropout mask for every policy's F
        out = runner.forward(0, x, policy=policy)  # type: ignore[arg-type]
        torch.manual_seed(2)  # R must not depend on the RNG state at its time
        if policy == "recompute":
            assert runner.held() == (1, 0)
            runner.recompute(0)
        if policy == "offload":
            runner.offload(0)
            runner.reload(0)
        runner.backward_input(0, grad)
        runner.backward_weight(0)
        assert runner.held() == (0, 0)
        assert isinstance(out, torch.Tensor)
        results[policy] = (out, [p.grad.clone() for p in copy.parameters()
                                 if p.grad is not None])
    for policy in ("recompute", "offload"):
        out, grads = results[policy]
        assert torch.equal(out, results["keep"][0])
        assert len(grads) == len(results["keep"][1]) == 4
        for a, b in zip(grads, results["keep"][1], strict=True):
            assert torch.equal(a, b), policy


def test_offload_moves_the_saved_activation_to_the_host_and_back() -> None:
    runner = _runner(nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8)))
    runner.forward(0, torch.randn(4, 8), policy="offload")
    saved = runner._offloaded[0]
    assert saved  # the ReLU's and the Linears' saved inputs
    before = [box.tensor for box in saved]
    runner.offload(0)
    assert all(box.tensor is not old for box, old in zip(saved, before, strict=True))
    assert all(box.tensor.device.type == "cpu" for box in saved)
    runner.reload(0)
    runner.backward_input(0, torch.randn(4, 8))
    assert 0 not in runner._offloaded


def test_policy_ops_out_of_order_are_named() -> None:
    runner = _runner(nn.Linear(8, 8))
    with pytest.raises(RuntimeError, match="R of stage 0 microbatch 3 without a recomputed F"):
        runner.recompute(3)
    with pytest.raises(RuntimeError, match="L of stage 0 microbatch 2 without an offloaded F"):
        runner.reload(2)
    runner.forward(1, torch.randn(2, 8), policy="recompute")
    with pytest.raises(RuntimeError, match=r"B of stage 0 microbatch 1 before its F \(or its R\)"):
        runner.backward_input(1, torch.randn(2, 8))


def test_saved_activations_leave_the_device_as_the_policy_says() -> None:
    """What F leaves on the device until B, measured: keep holds every saved tensor;
    recompute holds none (only the input it was given); offload holds them until O, and
    after O the device copies are gone (nothing refers to them) until L."""
    import gc
    import weakref

    module = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64))
    x = torch.randn(32, 64)
    saved: list[weakref.ref[torch.Tensor]] = []

    def count(t: torch.Tensor) -> torch.Tensor:
        if not isinstance(t, nn.Parameter):
            saved.append(weakref.ref(t))
        return t

    # Keep: F's graph holds its saved tensors (counted by an outer hook).
    keep = _runner(module)
    with torch.autograd.graph.saved_tensors_hooks(count, lambda t: t):
        keep.forward(0, x)
    gc.collect()
    assert saved and all(ref() is not None for ref in saved)
    # Recompute: F runs without a graph, so autograd saves nothing.
    saved.clear()
    recompute = _runner(module)
    with torch.autograd.graph.saved_tensors_hooks(count, lambda t: t):
        recompute.forward(0, x, policy="recompute")
    assert saved == []
    # Offload: the runner's boxes hold the saved tensors; after O the originals are freed.
    offload = _runner(module)
    offload.forward(0, x, policy="offload")
    originals = [weakref.ref(box.tensor) for box in offload._offloaded[0]]
    on_device = offload.offloaded_bytes(0)
    # The hidden activation (ReLU's output, the second Linear's input); the stage's input
    # stays (m_keep), held by F's record for B.
    assert on_device >= 32 * 64 * 4
    assert not any(box.tensor is offload._forward[0].inputs[0]
                   for box in offload._offloaded[0])
    offload.offload(0)
    offload._lanes().synchronize()  # the copies run beside compute: wait until they read
    gc.collect()
    assert all(ref() is None for ref in originals)
    offload.reload(0)
    for runner in (keep, recompute, offload):
        if runner is recompute:
            runner.recompute(0)
        runner.backward_input(0, torch.ones(32, 64))
        runner.backward_weight(0)
        assert runner.held() == (0, 0)
