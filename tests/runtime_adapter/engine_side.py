"""Rank functions of the engine tests (module level, so spawn can pickle them): the
wrapper refusals, and what torch's runtime does where the torch engine departs from its
defaults (the evidence behind each departure)."""

from __future__ import annotations

from typing import Any

from runtime_adapter import torch_engine
from runtime_adapter.stage import LossFn
from tests.runtime_adapter import grid


def refusal(rank: int, world: int, engine: str, method: str, wrapper: str) -> str:
    """The error the engine raises for `wrapper` stages on a 2x2 grid case ("" if none)."""
    try:
        grid.grid(rank, world, 2, engine, [(method, None, wrapper)])
    except ValueError as exc:
        return str(exc)
    return ""


def torch_ddp_split_unguarded(rank: int, world: int, method: str) -> dict[str, float]:
    """The 2x2 grid case with DDP stages run by torch's runtime with the engine's wrapper
    check removed: the gradients torch leaves (its errors vs. the data-parallel mean)."""
    torch_engine.check_for_torch = lambda *args: None  # this process only
    return grid.grid(rank, world, 2, "torch", [(method, None, "ddp")])[
        grid.case_key(method, None, "ddp")]


def torch_default_grad_scaling(rank: int, world: int, method: str) -> dict[str, float]:
    """The grid case on `world` pipeline ranks (no data parallel) with torch's own loss convention
    instead of the engine's: the plain loss and ``scale_grads=True`` (each stage divides
    its parameters' ``.grad`` by m after the step)."""
    runtime = torch_engine._PipelineScheduleRuntime

    class TorchDefaults(runtime):  # type: ignore[misc, valid-type]
        def __init__(self, stages: Any, n_microbatches: int, loss_fn: LossFn,
                     scale_grads: bool) -> None:
            m = n_microbatches
            super().__init__(stages, n_microbatches=m, scale_grads=True,
                             loss_fn=lambda out, target: loss_fn(out, target) * m)

    torch_engine._PipelineScheduleRuntime = TorchDefaults  # this process only
    return grid.grid(rank, world, 1, "torch", [(method, None)])[grid.case_key(method, None)]
