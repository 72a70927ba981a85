"""Picking the engine that runs a schedule: ``"ppsched"`` (our executor) or ``"torch"``
(torch.distributed.pipelining's runtime fed with our actions).

Both take ``(schedule, stages, loss_fn, group=..., dp_group=..., tied=...,
autocast_dtype=...)`` and give ``run(microbatches, targets, accumulate=..., sync=...)``
returning a `StepResult` (``.loss`` on the last stage's rank) and ``parameters()`` for the
optimizer. What each supports: docs/running.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import torch
from ppsched.runtime_adapter.executor import PipelineExecutor, StepResult
from ppsched.runtime_adapter.stage import LossFn
from ppsched.runtime_adapter.torch_engine import TorchPipelineEngine
from ppsched.solver.model import Schedule
from torch import nn

ENGINE_NAMES = ("ppsched", "torch")


class Engine(Protocol):
    """What both engines offer the training loop."""

    def run(self, microbatches: Sequence[torch.Tensor] | None = None,
            targets: Sequence[torch.Tensor] | None = None, *, accumulate: bool = False,
            sync: bool = True) -> StepResult: ...

    def parameters(self) -> list[nn.Parameter]: ...


def make_engine(engine: str, schedule: Schedule | dict[str, Any],
                stages: Mapping[int, nn.Module], loss_fn: LossFn,
                **options: Any) -> Engine:
    """The engine named `engine` for this rank's `stages`.

    `options` go to its constructor: ``group``, ``dp_group``, ``tied`` and
    ``autocast_dtype`` for both; ``timeout_s`` for ``"ppsched"`` only (torch's waits use
    the process group's timeout).

    Raises:
        ValueError: an unknown engine name, or what the engine's constructor refuses.
    """
    if engine == "ppsched":
        return PipelineExecutor(schedule, stages, loss_fn, **options)
    if engine == "torch":
        if "timeout_s" in options:
            raise ValueError("invalid 'timeout_s' for engine='torch': its waits use the "
                             "process group's timeout (init_process_group(timeout=...)); "
                             "expected no timeout_s, or engine='ppsched'")
        return TorchPipelineEngine(schedule, stages, loss_fn, **options)
    raise ValueError(f"invalid 'engine': got {engine!r}; expected one of "
                     f"{', '.join(ENGINE_NAMES)}")
