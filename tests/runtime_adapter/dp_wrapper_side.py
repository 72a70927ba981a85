"""Rank functions of the data-parallel wrapper tests (module level, so spawn can pickle
them): the refusals, and what torch's runtime does with DDP and a split backward without
the engine's guard (the evidence behind that refusal)."""

from __future__ import annotations

from runtime_adapter import torch_engine
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
