"""One pipeline stage on this rank: its F, B and W of a microbatch, and what each holds.

Memory follows the cost model (DESIGN.md section 3): F keeps its autograd graph (``m_b``);
B computes the input gradient, frees the graph and keeps only what W needs (``m_w``:
the Linear inputs and output gradients, and fallback gradients); W frees the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from runtime_adapter.weight_grad import (
    Deferred,
    WeightGradStore,
    apply_weight_grads,
    split_linears,
)

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class _Forward:
    """What F holds until B: the input leaf and the output (or scaled loss) with its graph."""

    input: torch.Tensor | None
    output: torch.Tensor


class StageRunner:
    """Runs F, B and W of one stage, one microbatch at a time, in any valid order.

    Args:
        stage: the global stage index.
        module: the stage's module (its Linears are made `SplitLinear` in place).
        is_last: the last stage applies `loss_fn` to its output.
        loss_fn: ``loss_fn(output, target)`` of one microbatch.
        num_microbatches: the step's loss is the mean of the microbatches' losses, so each
            microbatch's loss is divided by it before its backward.
        autocast_dtype: run F (and the loss) under ``torch.autocast`` with this dtype.
    """

    def __init__(self, stage: int, module: nn.Module, *, is_last: bool, loss_fn: LossFn,
                 num_microbatches: int, autocast_dtype: torch.dtype | None = None) -> None:
        self.stage = stage
        self.module = module
        self.is_last = is_last
        self.loss_fn = loss_fn
        self.num_microbatches = num_microbatches
        self.autocast_dtype = autocast_dtype
        self.loss_scale = 1.0  # a grad scaler's factor, set by the executor per step
        self.store = WeightGradStore()
        self.fallback_params = split_linears(module, self.store)
        fallback = {id(p) for p in self.fallback_params}
        self.linear_params = [p for p in module.parameters()
                              if p.requires_grad and id(p) not in fallback]
        self._forward: dict[int, _Forward] = {}
        self._deferred: dict[int, Deferred] = {}
        self.losses: dict[int, torch.Tensor] = {}

    def autocast(self) -> torch.autocast:
        """The autocast context of F (disabled when no dtype was given)."""
        device = next((p.device.type for p in self.module.parameters()), "cpu")
        return torch.autocast(device, dtype=self.autocast_dtype,
                              enabled=self.autocast_dtype is not None)

    def held(self) -> tuple[int, int]:
        """Microbatches between F and B, and between B and W (for leak checks)."""
        return len(self._forward), len(self._deferred)

    def deferred_bytes(self, microbatch: int) -> int:
        """Bytes a B of `microbatch` holds for its W (0 when none is pending)."""
        deferred = self._deferred.get(microbatch)
        return deferred.nbytes() if deferred is not None else 0

    def forward(self, microbatch: int, x: torch.Tensor, target: torch.Tensor | None = None,
                ) -> torch.Tensor | None:
        """F: run the stage; return its output, detached, for the next stage (None if last)."""
        if microbatch in self._forward:
            raise RuntimeError(f"F of stage {self.stage} microbatch {microbatch} ran twice")
        leaf: torch.Tensor | None = None
        if x.is_floating_point():
            # A leaf of its own, so that B can ask autograd for exactly this gradient.
            leaf = x.detach().requires_grad_(True)
            x = leaf
        if self.is_last and target is None:
            raise ValueError(f"invalid 'targets': got None for microbatch {microbatch}; "
                             "expected a target tensor on the rank of the last stage")
        with self.autocast():
            output = self.module(x)
            if self.is_last:
                assert target is not None
                loss = self.loss_fn(output, target)
        if self.is_last:
            # The loss stays a tensor (no .item()): on CUDA reading it would block the host.
            self.losses[microbatch] = loss.detach()
            self._forward[microbatch] = _Forward(
                leaf, loss * (self.loss_scale / self.num_microbatches))
            return None
        self._forward[microbatch] = _Forward(leaf, output)
        return output.detach()

    def backward_input(self, microbatch: int, grad_output: torch.Tensor | None,
                       ) -> torch.Tensor | None:
        """B: the input gradient (None on the first stage); W's share is deferred."""
        held = self._forward.pop(microbatch, None)
        if held is None:
            raise RuntimeError(f"B of stage {self.stage} microbatch {microbatch} before its F")
        if not self.is_last and grad_output is None:
            raise RuntimeError(f"B of stage {self.stage} microbatch {microbatch} without the "
                               "gradient of its output")
        wants_input = held.input is not None and self.stage > 0
        inputs: list[torch.Tensor] = ([held.input] if wants_input and held.input is not None
                                      else [])
        # The Linears' weights are asked for too, so that autograd runs their backward even
        # on the first stage (whose input needs no gradient); their Function returns None
        # for them and queues the weight product instead.
        inputs += self.fallback_params + self.linear_params
        deferred = self.store.begin()
        try:
            if inputs:
                grads = torch.autograd.grad(held.output, inputs, grad_outputs=grad_output,
                                            allow_unused=True)
            else:
                grads = ()
        finally:
            self.store.end()
        offset = 1 if wants_input else 0
        # Fallback parameters' gradients, and those autograd returns for a split Linear's
        # parameter through another use (a tie, an F.linear): its own Function gave None.
        for param, grad in zip(self.fallback_params + self.linear_params, grads[offset:],
                               strict=True):
            if grad is not None:
                deferred.fallback.append((param, grad))
        self._deferred[microbatch] = deferred
        return grads[0] if wants_input else None

    def backward_weight(self, microbatch: int) -> None:
        """W: the weight gradients B deferred, added to ``.grad``."""
        deferred = self._deferred.pop(microbatch, None)
        if deferred is None:
            raise RuntimeError(f"W of stage {self.stage} microbatch {microbatch} before its B")
        apply_weight_grads(deferred)
