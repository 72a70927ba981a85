"""Stages wrapped in a data-parallel module (DDP, FSDP2): what each engine does with them.

DDP and FSDP reduce gradients from autograd hooks that fire when ``.backward()``
accumulates into a parameter. Our executor's B/W compute gradients with
``torch.autograd.grad`` and set ``.grad`` themselves, and so does torch's split backward
(``I``/``W``): the hooks never fire, and a wrapped stage would silently keep each replica's
own gradient. So:

- ``engine="ppsched"``: a DDP-wrapped stage is run unwrapped and its DDP process group
  becomes the executor's ``dp_group`` (the executor averages each gradient over it after
  its last W: the same result DDP gives). FSDP2 is refused: its parameters are shards the
  executor cannot reduce-scatter.
- ``engine="torch"``: torch's runtime reduce-scatters an FSDP2-wrapped stage itself after
  the stage's last backward; DDP is accepted only when no backward is split (torch calls
  DDP's reducer on the last fused backward).

A parameter shared by two stages of one rank (the tied embedding and head under the V
placement) cannot be wrapped stage by stage: ``fully_shard`` on each stage gives each its
own sharded copy, and the tie's gradient is split between them without an error
(`fully_shard_stages` refuses it; a test shows the wrong gradient), and two DDP modules
would each reduce it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import overload

import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.nn.parallel import DistributedDataParallel


def shared_parameters(stages: Mapping[int, nn.Module]) -> list[str]:
    """Parameters held by two or more of `stages`, as ``"stage.name (stages a, b)"``."""
    holders: dict[int, list[tuple[int, str]]] = {}
    for s, module in stages.items():
        inner = module.module if isinstance(module, DistributedDataParallel) else module
        for name, p in inner.named_parameters():
            holders.setdefault(id(p), []).append((s, name))
    return [f"{where[0][0]}.{where[0][1]} (stages {', '.join(str(s) for s, _ in where)})"
            for where in holders.values() if len({s for s, _ in where}) > 1]


@overload
def fully_shard_stages(stages: Mapping[int, nn.Module],
                       mesh: DeviceMesh) -> dict[int, nn.Module]: ...


@overload
def fully_shard_stages(stages: Mapping[int, nn.Module], mesh: DeviceMesh, *,
                       tied: Sequence[nn.Parameter],
                       ) -> tuple[dict[int, nn.Module], list[nn.Parameter]]: ...


def fully_shard_stages(stages: Mapping[int, nn.Module], mesh: DeviceMesh, *,
                       tied: Sequence[nn.Parameter] | None = None,
                       ) -> dict[int, nn.Module] | tuple[dict[int, nn.Module],
                                                         list[nn.Parameter]]:
    """This rank's stages, each made an FSDP2 module over `mesh` (in place), for
    ``engine="torch"``; with `tied`, also the tied parameters to pass to the engine.

    ``fully_shard`` replaces every parameter by a new DTensor one: a tied weight taken
    before it is a stale tensor no stage uses, so pass the weights taken before and use
    the ones returned (the same names, now sharded).

    Raises:
        ValueError: a parameter shared by two of the stages (see the module's docstring),
            or a `tied` entry that is not a parameter of the stages.
    """
    shared = shared_parameters(stages)
    if shared:
        raise ValueError(
            f"invalid 'stages': shared by two stages of this rank: {', '.join(shared)}; "
            "fully_shard on each stage would give each its own copy and split the tie's "
            "gradient between them; expected no parameter shared between the stages of a "
            "rank (a placement with the tied stages on different ranks, and tied=), or "
            "unwrapped stages with dp_group=")
    where = {id(p): (s, name) for s, module in stages.items()
             for name, p in module.named_parameters()}
    for i, p in enumerate(tied or ()):
        if id(p) not in where:
            raise ValueError(f"invalid 'tied': tied[{i}] (shape {list(p.shape)}) is not a "
                             f"parameter of the stages {sorted(stages)}; expected one of "
                             "their parameters, taken before sharding")
    names = [where[id(p)] for p in tied or ()]
    for module in stages.values():
        fully_shard(module, mesh=mesh)
    if tied is None:
        return dict(stages)
    return dict(stages), [stages[s].get_parameter(name) for s, name in names]


def _inner_wrappers(module: nn.Module) -> list[str]:
    """Names of DDP/FSDP2 modules strictly inside `module`."""
    return [f"{name} ({type(sub).__name__})" for name, sub in module.named_modules()
            if name and isinstance(sub, (DistributedDataParallel, FSDPModule))]


def unwrap_for_ppsched(stages: Mapping[int, nn.Module],
                       dp_group: dist.ProcessGroup | None,
                       ) -> tuple[dict[int, nn.Module], dist.ProcessGroup | None]:
    """The stages our executor runs and the data-parallel group it reduces over.

    DDP-wrapped stages give their inner module and their process group (all of a rank's
    stages wrapped alike, over one group, equal to `dp_group` when that is given too).

    Raises:
        ValueError: an FSDP2 stage, a DDP or FSDP module inside a stage, stages wrapped
            unlike each other, or DDP over a group other than `dp_group`.
    """
    ddp = {s: m for s, m in stages.items() if isinstance(m, DistributedDataParallel)}
    for s, module in stages.items():
        if isinstance(module, FSDPModule):
            raise ValueError(
                f"invalid 'stages': stage {s} is wrapped in {type(module).__name__} "
                "(fully_shard): engine='ppsched' sets gradients itself and cannot "
                "reduce-scatter FSDP shards; expected the unwrapped module with "
                "dp_group=<the data-parallel group>, or engine='torch', which runs FSDP2 "
                "stages")
        inner = _inner_wrappers(module.module if s in ddp else module)
        if inner:
            raise ValueError(
                f"invalid 'stages': stage {s} holds data-parallel wrappers inside it "
                f"({', '.join(inner)}), whose hooks never fire under engine='ppsched'; "
                "expected plain modules with dp_group=, or the whole stage in DDP")
    if not ddp:
        return dict(stages), dp_group
    if len(ddp) != len(stages):
        raise ValueError(f"invalid 'stages': stages {sorted(ddp)} are wrapped in "
                         f"DistributedDataParallel and stages "
                         f"{sorted(set(stages) - set(ddp))} are not; expected every stage "
                         "of this rank wrapped alike")
    groups = {tuple(dist.get_process_group_ranks(m.process_group)) for m in ddp.values()}
    if dp_group is not None:
        groups.add(tuple(dist.get_process_group_ranks(dp_group)))
    if len(groups) != 1:
        raise ValueError(f"invalid 'dp_group': the DDP stages and dp_group span different "
                         f"ranks {sorted(groups)}; expected one data-parallel group")
    group = dp_group if dp_group is not None else next(iter(ddp.values())).process_group
    return {s: m.module if s in ddp else m for s, m in stages.items()}, group


def check_for_torch(stages: Mapping[int, nn.Module], dp_group: dist.ProcessGroup | None,
                    splits_backward: bool, method: str) -> None:
    """Refuse the wrappings torch's runtime would reduce wrongly or not at all.

    Raises:
        ValueError: a wrapper with `dp_group` too (two reductions), DDP with a split
            backward or over a parameter two stages share, or a wrapper only inside a
            stage (torch's runtime looks at the stage's root module alone).
    """
    for s, module in stages.items():
        wrapped = isinstance(module, (DistributedDataParallel, FSDPModule))
        if wrapped and dp_group is not None:
            raise ValueError(f"invalid 'dp_group': stage {s} is wrapped in "
                             f"{type(module).__name__}, which reduces its gradients "
                             "itself; expected dp_group=None with wrapped stages")
        if isinstance(module, DistributedDataParallel) and shared_parameters(stages):
            raise ValueError(
                f"invalid 'stages': stage {s} is wrapped in DistributedDataParallel and "
                "two DDP modules would each reduce what two stages of this rank share: "
                f"{', '.join(shared_parameters(stages))}; expected no parameter "
                "shared between the stages of a rank, or unwrapped stages with dp_group=")
        if isinstance(module, DistributedDataParallel) and splits_backward:
            raise ValueError(
                f"invalid 'stages': stage {s} is wrapped in DistributedDataParallel and the "
                f"schedule ({method}) splits B and W: torch's split backward computes "
                "weight gradients with torch.autograd.grad, so DDP's hooks never fire and "
                "each replica would keep its own gradient; expected fully_shard (FSDP2) "
                "stages, unwrapped stages with dp_group=, or a schedule with fused "
                "backwards (e.g. 1f1b)")
        if not isinstance(module, FSDPModule):
            inner = _inner_wrappers(module.module if isinstance(
                module, DistributedDataParallel) else module)
            if inner:
                raise ValueError(
                    f"invalid 'stages': stage {s} holds data-parallel wrappers inside it "
                    f"({', '.join(inner)}) but its root is {type(module).__name__}: "
                    "torch's runtime reduces only a stage whose root is fully_shard; "
                    "expected fully_shard applied to the stage module too (as torchtitan "
                    "does)")
