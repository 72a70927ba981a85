"""The B/W split in one process: B leaves weights alone, W completes the gradients."""

from __future__ import annotations

import copy

import torch
from ppsched.runtime_adapter.model import Block, mse_loss
from ppsched.runtime_adapter.stage import StageRunner
from ppsched.runtime_adapter.weight_grad import SplitLinear, WeightGradStore, split_linears
from torch import nn


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(Block(8, 16), Block(8, 16))


def test_split_linears_swaps_only_plain_linears_and_lists_the_rest() -> None:
    class Custom(nn.Linear):
        pass

    model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), Custom(4, 4))
    fallback = split_linears(model, WeightGradStore())
    assert type(model[0]) is SplitLinear and isinstance(model[0], nn.Linear)
    assert type(model[2]) is Custom
    assert {id(p) for p in fallback} == {id(p) for p in [*model[1].parameters(),
                                                         *model[2].parameters()]}


def test_b_computes_only_the_input_gradient_and_w_the_weights() -> None:
    reference = _model()
    stage = copy.deepcopy(reference)
    x, y = torch.randn(5, 8), torch.randn(5, 8)
    xr = x.clone().requires_grad_(True)
    mse_loss(reference(xr), y).backward()

    runner = StageRunner(1, stage, is_last=True, loss_fn=mse_loss, num_microbatches=1)
    runner.forward(0, x, y)
    grad_input = runner.backward_input(0, None)
    assert grad_input is not None
    torch.testing.assert_close(grad_input, xr.grad, rtol=1e-6, atol=1e-7)
    # After B no parameter has a gradient: Linears queued theirs, the rest are held.
    assert all(p.grad is None for p in stage.parameters())
    assert runner.held() == (0, 1) and runner.deferred_bytes(0) > 0
    runner.backward_weight(0)
    assert runner.held() == (0, 0)
    for p, q in zip(stage.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-7)


def test_the_w_stash_holds_no_autograd_graph() -> None:
    runner = StageRunner(0, _model(), is_last=False, loss_fn=mse_loss, num_microbatches=1)
    out = runner.forward(0, torch.randn(3, 8))
    assert out is not None and out.grad_fn is None
    runner.backward_input(0, torch.ones(3, 8))
    deferred = runner._deferred[0]
    assert deferred.linear and all(x.grad_fn is None and g.grad_fn is None
                                   for _, x, g in deferred.linear)
    assert all(g.grad_fn is None for _, g in deferred.fallback)


def test_split_linear_outside_a_pipeline_behaves_like_linear() -> None:
    torch.manual_seed(1)
    plain = nn.Linear(3, 2)
    split = copy.deepcopy(plain)
    split_linears(split, WeightGradStore())
    x = torch.randn(4, 3)
    plain(x).square().sum().backward()
    split(x).square().sum().backward()
    torch.testing.assert_close(split.weight.grad, plain.weight.grad)
    torch.testing.assert_close(split.bias.grad, plain.bias.grad)
