"""What crosses a stage boundary: one tensor, a tuple of tensors (the next stage's
positional arguments) or a dict of tensors (its keyword arguments).

A value is sent as its tensors in order (`flatten`), after a one-time description of its
layout (`Layout`: kind, keys, each tensor's shape and dtype) sent in the shape handshake.
Only floating-point tensors carry a gradient back; integer ones (token ids, masks) do not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from ppsched.runtime_adapter.comm import decode_meta, encode_meta
from torch import nn

Value = (torch.Tensor | tuple[torch.Tensor, ...] | list[torch.Tensor]
         | Mapping[str, torch.Tensor])
Kind = Literal["tensor", "tuple", "dict"]
_KINDS: tuple[Kind, ...] = ("tensor", "tuple", "dict")
_META = 10  # int64s per tensor (runtime_adapter.comm's header)


@dataclass(frozen=True)
class Layout:
    """A boundary value's structure: its kind, dict keys, and each tensor's meta."""

    kind: Kind
    keys: tuple[str, ...]
    metas: tuple[tuple[torch.Size, torch.dtype], ...]

    @property
    def grad_metas(self) -> tuple[tuple[torch.Size, torch.dtype], ...]:
        """The metas of the tensors that carry a gradient back (floating point)."""
        return tuple(m for m in self.metas if m[1].is_floating_point)


def flatten(value: Value, what: str) -> tuple[Layout, list[torch.Tensor]]:
    """The value's layout and its tensors in order.

    Raises:
        ValueError: `value` is not a tensor, a tuple/list of tensors or a dict of tensors
            (`what` names it).
    """
    if isinstance(value, torch.Tensor):
        kind: Kind = "tensor"
        keys: tuple[str, ...] = ()
        tensors = [value]
    elif isinstance(value, (tuple, list)):
        kind, keys, tensors = "tuple", (), list(value)
    elif isinstance(value, Mapping):
        kind, keys = "dict", tuple(str(k) for k in value)
        tensors = [value[k] for k in value]
    else:
        raise ValueError(f"invalid '{what}': got {type(value).__name__}; expected a tensor, "
                         "a tuple of tensors or a dict of tensors")
    bad = [type(t).__name__ for t in tensors if not isinstance(t, torch.Tensor)]
    if bad or not tensors:
        raise ValueError(f"invalid '{what}': got a {kind} of {bad or 'nothing'}; expected "
                         "at least one tensor, and only tensors")
    return Layout(kind, keys, tuple((t.shape, t.dtype) for t in tensors)), tensors


def unflatten(layout: Layout, tensors: Sequence[torch.Tensor]) -> Value:
    if layout.kind == "tensor":
        return tensors[0]
    if layout.kind == "tuple":
        return tuple(tensors)
    return dict(zip(layout.keys, tensors, strict=True))


def call(module: nn.Module, value: Value) -> Value:
    """The stage's forward on a boundary value: tuple as positional, dict as keyword."""
    if isinstance(value, torch.Tensor):
        return module(value)
    if isinstance(value, (tuple, list)):
        return module(*value)
    return module(**value)


def encode_layout(layout: Layout, device: torch.device) -> torch.Tensor:
    """An int64 tensor: kind, count, each tensor's meta, then the keys' UTF-8 bytes."""
    head = [_KINDS.index(layout.kind), len(layout.metas)]
    body = torch.cat([encode_meta(s, d, device) for s, d in layout.metas])
    keys = list("\0".join(layout.keys).encode())
    return torch.cat([torch.tensor(head, dtype=torch.int64, device=device), body,
                      torch.tensor(keys, dtype=torch.int64, device=device)])


def decode_layout(data: torch.Tensor) -> Layout:
    kind, count = (int(x) for x in data[:2].tolist())
    metas = tuple(decode_meta(data[2 + k * _META:2 + (k + 1) * _META]) for k in range(count))
    raw = bytes(int(x) for x in data[2 + count * _META:].tolist()).decode()
    return Layout(_KINDS[kind], tuple(raw.split("\0")) if raw else (), metas)
