"""What both engines check about the parameters they reduce and train: the tied weights a
user names, and (in debug mode) that a step left every trained parameter a gradient.

Both failures were silent: a tied weight taken before ``fully_shard_stages`` swapped in
new DTensor parameters is a stale tensor the stages never use, so its "gradient" (zeros, or
None) was summed and the real weights' ties never were (81% wrong on the embedding); and a
runtime that skips a parameter's weight gradient leaves it untrained with no error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor

Tie = tuple[nn.Parameter, dist.ProcessGroup]


def named_parameters(stages: Mapping[int, nn.Module]) -> dict[int, str]:
    """id of each of the stages' parameters -> ``stage S: NAME`` (the first stage holding
    it)."""
    names: dict[int, str] = {}
    for s in sorted(stages):
        for name, p in stages[s].named_parameters():
            names.setdefault(id(p), f"stage {s}: {name}")
    return names


def checked_ties(tied: Sequence[Tie], stages: Mapping[int, nn.Module]) -> list[Tie]:
    """`tied`, once each is known to be a parameter the stages train, of the kind they
    hold, and of one shape across its group.

    Raises:
        ValueError: a tied parameter that is not one of the stages' (by identity, after
            any wrapping), a plain tensor where the stages hold DTensors, or a tie whose
            members on the other ranks have another shape; naming the parameter.
    """
    names = named_parameters(stages)
    sharded = [n for s in stages.values() for n, p in s.named_parameters()
               if isinstance(p, DTensor)]
    checked = []
    for i, (p, group) in enumerate(tied):
        what = f"tied[{i}] (shape {list(p.shape)})"
        if id(p) not in names:
            if sharded and not isinstance(p, DTensor):
                raise ValueError(
                    f"invalid 'tied': {what} is a plain tensor, but the stages hold DTensor "
                    f"parameters (e.g. {sharded[0]}): it was taken before fully_shard; "
                    "expected the parameters fully_shard_stages(..., tied=...) returns")
            raise ValueError(f"invalid 'tied': {what} is not a parameter of this rank's "
                             f"stages {sorted(stages)}; expected the very Parameter object "
                             "a stage holds (take it after any wrapping)")
        checked.append((p, group))
    _same_shapes(checked)
    return checked


def _same_shapes(tied: Sequence[Tie]) -> None:
    """Each tie's members have one shape on every rank of its group (a collective over
    each group, in the order the ties are listed, as their sums run)."""
    for i, (p, group) in enumerate(tied):
        shapes: list[list[int] | None] = [None] * dist.get_world_size(group)
        dist.all_gather_object(shapes, list(p.shape), group=group)
        if any(shape != list(p.shape) for shape in shapes):
            ranks = dist.get_process_group_ranks(group)
            described = ", ".join(f"rank {r}: {shape}" for r, shape in
                                  zip(ranks, shapes, strict=True))
            raise ValueError(f"invalid 'tied': tied[{i}]'s members differ in shape "
                             f"({described}); expected one shape across the tie's group")


class MissingGradients(RuntimeError):
    """A step left parameters that require grad without a gradient."""


def check_grads(stages: Mapping[int, nn.Module], rank: int) -> None:
    """Raise `MissingGradients` naming every parameter that requires grad and has none.

    Raises:
        MissingGradients: with each parameter's stage and name.
    """
    names = named_parameters(stages)
    missing = [names[id(p)] for s in stages.values() for p in s.parameters()
               if p.requires_grad and p.grad is None and id(p) in names]
    if missing:
        raise MissingGradients(
            f"rank {rank}: the step left {len(missing)} parameter(s) that require grad "
            f"without a gradient: {', '.join(dict.fromkeys(missing))}; the runtime skipped "
            "their backward (with torch's split backward, a parameter used outside the "
            "ops it splits); pass requires_grad=False for frozen ones")

