"""The B/W split: B computes the input gradient now, W the weight gradients later.

The Zero Bubble implementation's technique (its ``WeightGradStore``): every ``nn.Linear``
of a stage runs through an autograd Function whose backward returns only the input
gradient and queues ``(input, grad_output)``, both detached, for W, which then computes
``weight.grad += grad_output^T @ input`` and ``bias.grad += sum(grad_output)`` without
re-running the backward. Parameters of any other module (LayerNorm, Embedding, ...) fall
back to autograd: B computes their gradients along with the input gradient, holds them,
and W adds them to ``.grad`` (their cost lands in B, their ``.grad`` changes only in W).
A split Linear's parameter that is also used elsewhere (a tied weight, an ``F.linear``)
gets that other use's gradient from autograd in B, held and added in W the same way.
Frozen parameters get no W and no ``.grad``. Under autocast, B and W compute in the
autocast dtype and cast back, as autocast's own backward does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class Deferred:
    """What one B left for its W: queued Linear products and fallback gradients."""

    linear: list[tuple[nn.Linear, torch.Tensor, torch.Tensor]] = field(default_factory=list)
    fallback: list[tuple[nn.Parameter, torch.Tensor]] = field(default_factory=list)

    def nbytes(self) -> int:
        """Bytes held for W (distinct storages counted once)."""
        tensors = [t for _, x, g in self.linear for t in (x, g)] + [g for _, g in self.fallback]
        return _distinct_bytes(tensors)


class WeightGradStore:
    """Collects what a Linear's backward queues while a B runs (one store per stage)."""

    def __init__(self) -> None:
        self._capturing: Deferred | None = None

    @property
    def capturing(self) -> Deferred | None:
        return self._capturing

    def begin(self) -> Deferred:
        assert self._capturing is None, "a B is already capturing on this stage"
        self._capturing = Deferred()
        return self._capturing

    def end(self) -> Deferred:
        deferred, self._capturing = self._capturing, None
        assert deferred is not None, "end() without begin()"
        return deferred


class _SplitLinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                module: SplitLinear) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.module = module
        ctx.has_bias = bias is not None
        return F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        # Under autocast F computed in a lower precision (grad_output's dtype): B and W
        # repeat autocast's backward exactly, a product in that dtype cast back to the
        # dtype of the input and of the weight.
        grad_input = ((grad_output @ weight.to(grad_output.dtype)).to(x.dtype)
                      if ctx.needs_input_grad[0] else None)
        wants_weight = ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
        if not wants_weight:  # frozen Linear: no W at all
            return grad_input, None, None, None
        deferred = ctx.module.ppsched_store.capturing
        if deferred is not None:
            # Detached: the queue must not keep this step's autograd graph alive.
            deferred.linear.append((ctx.module, x.detach(), grad_output.detach()))
            return grad_input, None, None, None
        # Outside a pipeline B (a plain loss.backward()): behave like nn.Linear.
        grad_weight, grad_bias = _linear_weight_grads(x, grad_output, ctx.has_bias)
        return (grad_input,
                grad_weight.to(weight.dtype) if ctx.needs_input_grad[1] else None,
                grad_bias.to(weight.dtype) if grad_bias is not None
                and ctx.needs_input_grad[2] else None, None)


class SplitLinear(nn.Linear):
    """An ``nn.Linear`` whose backward defers its weight gradient to the stage's W.

    Made by `split_linears` (the class of an existing Linear is swapped, so parameters,
    state dict and ``isinstance(m, nn.Linear)`` are unchanged).
    """

    ppsched_store: WeightGradStore

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _SplitLinearFn.apply(x, self.weight, self.bias, self)


def split_linears(module: nn.Module, store: WeightGradStore) -> list[nn.Parameter]:
    """Make every exact ``nn.Linear`` in `module` a `SplitLinear` queueing into `store`.

    Returns:
        The parameters left to the autograd fallback (those of every other module, and
        of Linear subclasses, which may compute more than ``x @ W^T + b``).
    """
    split: set[int] = set()
    for sub in module.modules():
        if type(sub) is nn.Linear or type(sub) is SplitLinear:
            sub.__class__ = SplitLinear
            sub.ppsched_store = store  # type: ignore[assignment]
            split.update(id(p) for p in sub.parameters(recurse=False))
    return [p for p in module.parameters() if p.requires_grad and id(p) not in split]


def apply_weight_grads(deferred: Deferred) -> None:
    """W: add the deferred weight gradients to ``.grad``, then drop what B held."""
    for module, x, grad_output in deferred.linear:
        grad_weight, grad_bias = _linear_weight_grads(x, grad_output, module.bias is not None)
        if module.weight.requires_grad:
            _accumulate(module.weight, grad_weight.to(module.weight.dtype))
        if module.bias is not None and grad_bias is not None and module.bias.requires_grad:
            _accumulate(module.bias, grad_bias.to(module.bias.dtype))
    for param, grad in deferred.fallback:
        _accumulate(param, grad)
    deferred.linear.clear()
    deferred.fallback.clear()


def _linear_weight_grads(x: torch.Tensor, grad_output: torch.Tensor, has_bias: bool,
                         ) -> tuple[torch.Tensor, torch.Tensor | None]:
    # In grad_output's dtype: bf16/fp16 under autocast, as autocast's own backward.
    x2 = x.reshape(-1, x.shape[-1]).to(grad_output.dtype)
    g2 = grad_output.reshape(-1, grad_output.shape[-1])
    return g2.t() @ x2, (g2.sum(0) if has_bias else None)


def _accumulate(param: nn.Parameter, grad: torch.Tensor) -> None:
    if param.grad is None:
        param.grad = grad.detach().clone() if grad._base is not None else grad.detach()
    else:
        param.grad.add_(grad)


def _distinct_bytes(tensors: list[torch.Tensor]) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())
