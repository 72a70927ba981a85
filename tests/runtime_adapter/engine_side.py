"""Rank functions of the engine tests (module level, so spawn can pickle them): the
wrapper refusals, and what torch's runtime does where the torch engine departs from its
defaults (the evidence behind each departure)."""

from __future__ import annotations

import copy
from typing import Any

import torch.distributed as dist
from ppsched.runtime_adapter import dp_wrappers, torch_engine
from ppsched.runtime_adapter.gpt import GPTConfig, gpt_model, split_stages
from ppsched.runtime_adapter.stage import LossFn
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.nn.parallel import DistributedDataParallel

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


def torch_fsdp_shared_unguarded(rank: int, world: int, method: str) -> dict[str, float]:
    """The 2x2 grid case with FSDP2 stages sharded one by one although two stages of a
    rank share the tied weight (`fully_shard_stages`' check removed): the errors left."""
    dp_wrappers.shared_parameters = lambda stages: []  # this process only
    return grid.grid(rank, world, 2, "torch", [(method, None, "fsdp")])[
        grid.case_key(method, None, "fsdp")]


def ddp_over_shared_parameter(rank: int, world: int) -> str:
    """The error for two DDP stages sharing a parameter (no schedule needed to refuse)."""
    shared = nn.Linear(2, 2)
    stages = {0: DistributedDataParallel(nn.Sequential(shared)),
              3: DistributedDataParallel(nn.Sequential(nn.Tanh(), shared))}
    try:
        dp_wrappers.check_for_torch(stages, None, splits_backward=False, method="1f1b")
    except ValueError as exc:
        return str(exc)
    return ""


def fsdp_over_shared_parameter(rank: int, world: int) -> str:
    """The error for sharding the V placement's rank-0 stages (0 and 3 of the tied GPT)."""
    stages = split_stages(gpt_model(GPTConfig(layers=4), seed=7), 4)
    mine = copy.deepcopy({0: stages[0], 3: stages[3]})  # one deepcopy: the tie is kept
    mesh = DeviceMesh.from_group(dist.group.WORLD, "cpu")
    try:
        dp_wrappers.fully_shard_stages(mine, mesh)
    except ValueError as exc:
        return str(exc)
    return ""


def misuse_messages(rank: int, world: int) -> dict[str, str]:
    """On one rank (a group of one): the error for each wrapping the engines refuse,
    by case name ("" where nothing was raised)."""
    group = dist.group.WORLD
    mesh = DeviceMesh.from_group(group, "cpu")
    inner_ddp = {0: nn.Sequential(DistributedDataParallel(nn.Linear(2, 2)))}
    inner_fsdp = {0: nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))}
    dp_wrappers.fully_shard(inner_fsdp[0][1], mesh=mesh)
    mixed = {0: DistributedDataParallel(nn.Linear(2, 2)), 1: nn.Linear(2, 2)}
    cases: dict[str, Any] = {
        "ppsched inner DDP": lambda: dp_wrappers.unwrap_for_ppsched(inner_ddp, None),
        "ppsched mixed": lambda: dp_wrappers.unwrap_for_ppsched(mixed, None),
        "torch inner FSDP": lambda: dp_wrappers.check_for_torch(inner_fsdp, None, False,
                                                                "1f1b"),
        "torch DDP and dp_group": lambda: dp_wrappers.check_for_torch(
            {0: mixed[0]}, group, False, "1f1b"),
    }
    messages = {}
    for name, attempt in cases.items():
        try:
            attempt()
            messages[name] = ""
        except ValueError as exc:
            messages[name] = str(exc)
    return messages
