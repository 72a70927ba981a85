"""One stage in one process, on what real models do: a Linear's weight used again outside
the Linear (a tie), frozen weights and bf16 autocast."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from ppsched.runtime_adapter.stage import StageRunner
from torch import nn


class TiedTwice(nn.Module):
    """A Linear whose weight is used again through F.linear (a head tied to it)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.lin = nn.Linear(8, 8)
        self.other = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.other(self.lin(self.norm(x)))
        return F.linear(torch.tanh(h), self.lin.weight)


def _loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(out.float(), y)


def _pipelined(module: nn.Module, xs: list[torch.Tensor], ys: list[torch.Tensor],
               dtype: torch.dtype | None = None) -> StageRunner:
    runner = StageRunner(0, module, is_last=True, loss_fn=_loss, num_microbatches=len(xs),
                         autocast_dtype=dtype)
    for j, (x, y) in enumerate(zip(xs, ys, strict=True)):
        runner.forward(j, x, y)
    for j in range(len(xs)):  # every B, then every W: W's work really is deferred
        runner.backward_input(j, None)
    for j in range(len(xs)):
        runner.backward_weight(j)
    return runner


def _reference(module: nn.Module, xs: list[torch.Tensor], ys: list[torch.Tensor],
               dtype: torch.dtype | None = None) -> None:
    for x, y in zip(xs, ys, strict=True):
        with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
            loss = _loss(module(x), y)
        (loss / len(xs)).backward()


def _data(n: int = 3) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    g = torch.Generator().manual_seed(5)
    return ([torch.randn(4, 8, generator=g) for _ in range(n)],
            [torch.randn(4, 8, generator=g) for _ in range(n)])


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("dtype", [None, torch.bfloat16], ids=["fp32", "bf16"])
def test_a_weight_used_by_its_linear_and_again_gets_both_gradients(
        dtype: torch.dtype | None) -> None:
    torch.manual_seed(0)
    reference = TiedTwice()
    stage = copy.deepcopy(reference)
    xs, ys = _data()
    _reference(reference, xs, ys, dtype)
    _pipelined(stage, xs, ys, dtype)
    for (name, p), q in zip(stage.named_parameters(), reference.parameters(), strict=True):
        assert p.grad is not None and p.grad.dtype == torch.float32, name
        # bf16: autocast caches one bf16 copy of lin.weight for both uses, so the
        # reference sums the two uses' gradients in bf16 before casting to fp32; the B/W
        # split sums them in fp32. They differ by bf16 rounding: 2 units of 2^-8.
        tolerance = 1e-5 if dtype is None else 2 * 2.0**-8
        assert _rel(p.grad, q.grad) <= tolerance, (name, _rel(p.grad, q.grad))


def test_frozen_parameters_get_no_w_and_no_grad() -> None:
    torch.manual_seed(0)
    reference = TiedTwice()
    reference.other.requires_grad_(False)
    reference.norm.weight.requires_grad_(False)
    stage = copy.deepcopy(reference)
    xs, ys = _data()
    _reference(reference, xs, ys)
    runner = StageRunner(0, stage, is_last=True, loss_fn=_loss, num_microbatches=len(xs))
    for j, (x, y) in enumerate(zip(xs, ys, strict=True)):
        runner.forward(j, x, y)
        runner.backward_input(j, None)
        # Only the trainable Linear queued a weight product.
        assert [m for m, _, _ in runner._deferred[j].linear] == [stage.lin]
        runner.backward_weight(j)
    assert stage.other.weight.grad is None and stage.other.bias.grad is None
    assert stage.norm.weight.grad is None
    for p, q in zip(stage.parameters(), reference.parameters(), strict=True):
        if q.requires_grad:
            assert _rel(p.grad, q.grad) <= 1e-5
