"""Ops: the units a schedule orders (DESIGN.md section 1), and their text forms.

An op is ``(kind, stage, microbatch)``. It prints as the Zero Bubble paper's ``F3`` in
grids, and as torch.distributed.pipelining's ``0F3`` (stage, action, microbatch) in its
CSV, where our ``B`` is written ``I`` and our ``BW`` is written ``B``.
"""

from __future__ import annotations

import re
from typing import Literal, NamedTuple

Kind = Literal["F", "B", "W", "BW"]
KINDS: tuple[Kind, ...] = ("F", "B", "W", "BW")

# torch.distributed.pipelining's action names for our kinds (DESIGN.md section 4).
KIND_TO_TORCH = {"F": "F", "B": "I", "W": "W", "BW": "B"}
TORCH_TO_KIND = {v: k for k, v in KIND_TO_TORCH.items()}


class Op(NamedTuple):
    """One F, B, W or BW of one microbatch on one (global) stage."""

    kind: Kind
    stage: int
    microbatch: int

    def __str__(self) -> str:
        return f"{self.stage}{self.kind}{self.microbatch}"

    def cell(self, with_stage: bool = False) -> str:
        """The grid cell: ``F3``, or ``F3s5`` when the rank runs several stages."""
        return f"{self.kind}{self.microbatch}" + (f"s{self.stage}" if with_stage else "")

    def to_torch(self) -> str:
        """torch.distributed.pipelining's name, e.g. ``0I3`` for our ``B`` of stage 0."""
        return f"{self.stage}{KIND_TO_TORCH[self.kind]}{self.microbatch}"


_TORCH_ACTION = re.compile(r"^(\d+)([A-Z]+)(\d+)$")


def op_from_torch(text: str) -> Op:
    """Parse torch's ``0F3`` / ``0I3`` / ``0W3`` / ``0B3``; raise ValueError on anything else."""
    match = _TORCH_ACTION.match(text.strip())
    if not match or match.group(2) not in TORCH_TO_KIND:
        raise ValueError(f"not a compute action: {text!r} (expected e.g. 0F3, 0I3, 0W3, 0B3)")
    stage, action, microbatch = match.groups()
    kind: Kind = TORCH_TO_KIND[action]  # type: ignore[assignment]
    return Op(kind, int(stage), int(microbatch))
