"""The optimizer step after a pipelined step: synchronous, or with post-update validation.

The global checks (gradient norm for clipping, NaN/inf) need every rank's gradients.
A synchronous step reduces them first and then steps: a barrier that makes every rank
wait for the slowest. Post-update validation (Zero Bubble paper, "Optimizer
Synchronization"; seeds/zero-bubble-slides.txt) removes the barrier: each rank starts the
reduction asynchronously, snapshots its parameters and optimizer state, steps at once,
and only then reads the reduced result; if the check fails it rolls back to the snapshot
and does what the synchronous step would have done (skip the step on NaN/inf, or step
again with clipped gradients). The price is one copy of the parameters and optimizer
state per step.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist
from ppsched.runtime_adapter.comm import wait
from torch import nn


@dataclass(frozen=True)
class StepOutcome:
    """What the optimizer step did on this rank (every rank sees the same figures).

    Attributes:
        grad_norm: the global gradient norm over all ranks (inf or nan if not finite).
        finite: whether every gradient on every rank is finite.
        stepped: whether the parameters were updated.
        clipped: whether gradients were scaled to `max_grad_norm`.
        rolled_back: post-update validation undid an optimistic step.
    """

    grad_norm: float
    finite: bool
    stepped: bool
    clipped: bool
    rolled_back: bool


def step_optimizer(optimizer: torch.optim.Optimizer, params: Sequence[nn.Parameter], *,
                   post_validation: bool = False, max_grad_norm: float | None = None,
                   group: dist.ProcessGroup | None = None,
                   timeout_s: float = 60.0, loss_scale: float = 1.0) -> StepOutcome:
    """Step `optimizer` over this rank's `params` after the global gradient check.

    Args:
        optimizer: the rank's optimizer (over `params`).
        params: this rank's parameters (e.g. ``executor.parameters()``).
        post_validation: step first, validate after (no barrier), roll back on failure.
        max_grad_norm: clip the global gradient norm to this value (None: no clipping).
        group: the pipeline's process group.
        timeout_s: the longest the reduction may take.
        loss_scale: the factor the step's losses were multiplied by (``run(loss_scale=)``,
            fp16 loss scaling): gradients are divided by it first, so the norm, the
            NaN/inf check (over every rank, so all ranks skip or step alike) and the step
            see the true gradients. `LossScaler` adapts it from the outcome.

    Raises:
        ValueError: a `max_grad_norm` that is not a number > 0.
        PipelineTimeout: the reduction did not complete in time.
    """
    if max_grad_norm is not None and not (math.isfinite(max_grad_norm) and max_grad_norm > 0):
        raise ValueError(f"invalid 'max_grad_norm': got {max_grad_norm}; expected a number "
                         "> 0 or None")
    if not (math.isfinite(loss_scale) and loss_scale > 0):
        raise ValueError(f"invalid 'loss_scale': got {loss_scale}; expected a number > 0")
    grads = [p.grad for p in params if p.grad is not None]
    if loss_scale != 1.0:
        for g in grads:
            g.div_(loss_scale)
    device = grads[0].device if grads else torch.device("cpu")
    local = torch.zeros(2, dtype=torch.float64, device=device)
    for g in grads:
        g64 = g.detach().double()
        local[0] += (g64 * g64).sum()
        local[1] += (~torch.isfinite(g64)).sum()
    work = dist.all_reduce(local, group=group, async_op=True)
    what = "the global gradient check (all-reduce of the gradient norm and NaN/inf count)"
    snapshot = None
    if post_validation:
        snapshot = _snapshot(optimizer, params)
        optimizer.step()  # optimistic: no wait for the other ranks
    wait(work, time.monotonic() + timeout_s, what)
    finite = bool(local[1].item() == 0)
    norm = math.sqrt(local[0].item()) if finite else math.inf
    clip = finite and max_grad_norm is not None and norm > max_grad_norm
    if snapshot is not None:
        if finite and not clip:
            return StepOutcome(norm, finite, stepped=True, clipped=False, rolled_back=False)
        _restore(optimizer, params, snapshot)
    if finite:
        if clip:
            assert max_grad_norm is not None
            # The same scale torch.nn.utils.clip_grad_norm_ applies.
            scale = max_grad_norm / (norm + 1e-6)
            for g in grads:
                g.mul_(scale)
        optimizer.step()
    return StepOutcome(norm, finite, stepped=finite, clipped=clip,
                       rolled_back=snapshot is not None)


@dataclass
class _Snapshot:
    params: list[torch.Tensor]
    state: dict


def _snapshot(optimizer: torch.optim.Optimizer, params: Sequence[nn.Parameter]) -> _Snapshot:
    return _Snapshot([p.detach().clone() for p in params],
                     copy.deepcopy(optimizer.state_dict()))


def _restore(optimizer: torch.optim.Optimizer, params: Sequence[nn.Parameter],
             snapshot: _Snapshot) -> None:
    with torch.no_grad():
        for p, saved in zip(params, snapshot.params, strict=True):
            p.copy_(saved)
    optimizer.load_state_dict(snapshot.state)


class LossScaler:
    """Dynamic loss scaling for fp16 (the policy of ``torch.amp.GradScaler``), over the
    whole pipeline: the inf/NaN check is `step_optimizer`'s, reduced over every rank.

    Usage::

        result = executor.run(xs, ys, loss_scale=scaler.scale)
        outcome = step_optimizer(optimizer, params, loss_scale=scaler.scale)
        scaler.update(outcome.finite)
    """

    def __init__(self, *, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000) -> None:
        for name, value, ok in (("init_scale", init_scale, init_scale > 0),
                                ("growth_factor", growth_factor, growth_factor > 1),
                                ("backoff_factor", backoff_factor, 0 < backoff_factor < 1),
                                ("growth_interval", growth_interval, growth_interval >= 1)):
            if not ok:
                raise ValueError(f"invalid '{name}': got {value}; expected init_scale > 0, "
                                 "growth_factor > 1, 0 < backoff_factor < 1, "
                                 "growth_interval >= 1")
        self.scale = float(init_scale)
        self.growth_factor = growth_factor
        self.backoff_factor = backoff_factor
        self.growth_interval = growth_interval
        self._good_steps = 0

    def update(self, finite: bool) -> None:
        """Back off after a non-finite step; grow after `growth_interval` finite ones."""
        if not finite:
            self.scale *= self.backoff_factor
            self._good_steps = 0
            return
        self._good_steps += 1
        if self._good_steps == self.growth_interval:
            self.scale *= self.growth_factor
            self._good_steps = 0
