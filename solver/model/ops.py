"""Ops: the units a schedule orders (DESIGN.md section 1), and their text forms.

An op is ``(kind, stage, microbatch)``. It prints as the Zero Bubble paper's ``F3`` in
grids, and as torch.distributed.pipelining's ``0F3`` (stage, action, microbatch) in its
CSV, where our ``B`` is written ``I`` and our ``BW`` is written ``B``.

`FBOp` (DESIGN.md section 6.4) is the overlapped forward of one ``(stage, microbatch)``
and fused backward of another; torch writes it ``(0F3;7B2)OVERLAP_F_B``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal, NamedTuple

Kind = Literal["F", "B", "W", "BW", "FB", "R", "O", "L"]
# The kinds of one part of the work; an FB op is made of an F and a BW (section 6.4).
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


class FBOp(Op):
    """An overlapped ``F(stage, microbatch)`` and ``BW(stage_b, microbatch_b)`` on one rank.

    Why a subclass of the 3-tuple `Op`: ops are unpacked as ``kind, stage, microbatch``
    all over the solver and the views. An FBOp unpacks the same way (``"FB"`` and its
    forward's stage and microbatch) and carries its backward in two attributes, so code
    that only needs the kind keeps working, and code that times or places ops asks for
    `parts`. Equality and hashing include the backward.
    """

    stage_b: int
    microbatch_b: int

    def __new__(cls, stage: int, microbatch: int, stage_b: int, microbatch_b: int,
                ) -> FBOp:
        self = super().__new__(cls, "FB", stage, microbatch)
        self.stage_b = stage_b
        self.microbatch_b = microbatch_b
        return self

    def __getnewargs__(self) -> tuple[int, int, int, int]:  # type: ignore[override]
        return self.stage, self.microbatch, self.stage_b, self.microbatch_b

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FBOp) and tuple.__eq__(self, other) \
            and (self.stage_b, self.microbatch_b) == (other.stage_b, other.microbatch_b)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self.stage, self.microbatch, self.stage_b, self.microbatch_b))

    def __repr__(self) -> str:
        return f"FBOp({self.stage}, {self.microbatch}, {self.stage_b}, {self.microbatch_b})"

    @property
    def forward(self) -> Op:
        return Op("F", self.stage, self.microbatch)

    @property
    def backward(self) -> Op:
        return Op("BW", self.stage_b, self.microbatch_b)

    @property
    def parts(self) -> tuple[Op, Op]:
        """The two ops it overlaps, in the order a sequential runtime runs them."""
        return self.forward, self.backward

    def __str__(self) -> str:
        return f"({self.stage}F{self.microbatch};{self.stage_b}BW{self.microbatch_b})"

    def cell(self, with_stage: bool = False) -> str:
        """The grid cell: ``F3&BW2``, or ``F3s0&BW2s7`` when the rank runs several stages."""
        return self.forward.cell(with_stage) + "&" + self.backward.cell(with_stage)

    def to_torch(self) -> str:
        """torch's overlap action, e.g. ``(0F3;7B2)OVERLAP_F_B``."""
        return f"({self.forward.to_torch()};{self.backward.to_torch()}){TORCH_OVERLAP}"


# A schedule's order: one op list per rank, in the order the rank runs them.
Orders = list[list[Op]]


def parts(op: Op) -> tuple[Op, ...]:
    """The plain ops `op` is made of: its two parts for an FB, else `op` itself."""
    return op.parts if isinstance(op, FBOp) else (op,)


# Our text form of one op (STYLE.md: torch's ``0F1`` with our kind names); the stage may be
# left out where a caller gives it.
_TEXT_OP = re.compile(r"^(\d*)(BW|F|B|W|R|O|L)(\d+)$")
_PLAIN_KINDS: dict[str, Kind] = {"F": "F", "B": "B", "W": "W", "BW": "BW", "R": "R", "O": "O",
                                 "L": "L"}


def ops_from_text(text: str, stage: int = 0) -> list[Op]:
    """Ops from their printed form, e.g. ``"0F0 0B0 1BW1"``, or ``"F0 O0 B0"`` on `stage`.

    Each word is ``[stage]KIND microbatch`` (our kinds: F, B, W, BW, R, O, L), as `Op`
    prints it; a word without a stage is on `stage`. The inverse of
    ``" ".join(map(str, ops))``.

    Raises:
        ValueError: naming the first word that is not an op.
    """
    found = []
    for word in text.split():
        match = _TEXT_OP.match(word)
        if match is None:
            raise ValueError(f"not an op: {word!r} (expected e.g. 0F3, 1BW2, or F3 on the "
                             "given stage)")
        given, kind, microbatch = match.groups()
        found.append(Op(_PLAIN_KINDS[kind], int(given) if given else stage, int(microbatch)))
    return found


TORCH_OVERLAP = "OVERLAP_F_B"
_TORCH_ACTION = re.compile(r"^(\d+)([A-Z]+)(\d+)$")
_TORCH_OVERLAP = re.compile(r"^\((\d+F\d+);(\d+B\d+)\)" + TORCH_OVERLAP + "$")


def op_from_torch(text: str) -> Op:
    """Parse torch's ``0F3`` / ``0I3`` / ``0W3`` / ``0B3`` / ``(0F3;7B2)OVERLAP_F_B``.

    Raises:
        ValueError: on anything else.
    """
    overlap = _TORCH_OVERLAP.match(text.strip())
    if overlap:
        forward, backward = (op_from_torch(x) for x in overlap.groups())
        return FBOp(forward.stage, forward.microbatch, backward.stage, backward.microbatch)
    match = _TORCH_ACTION.match(text.strip())
    if not match or match.group(2) not in TORCH_TO_KIND:
        raise ValueError(f"not a compute action: {text!r} (expected e.g. 0F3, 0I3, 0W3, 0B3, "
                         "(0F3;7B2)OVERLAP_F_B)")
    stage, action, microbatch = match.groups()
    kind: Kind = TORCH_TO_KIND[action]  # type: ignore[assignment]
    return Op(kind, int(stage), int(microbatch))


def lane_of(kind: str, copy_lanes: int) -> str:
    """The lane an op kind runs on (DESIGN.md 6.3): ``compute`` for F/B/W/BW/R/FB;
    ``d2h``/``h2d`` for O/L with 2 copy lanes, ``copy`` for both with 1."""
    if kind in ("O", "L"):
        return "copy" if copy_lanes == 1 else ("d2h" if kind == "O" else "h2d")
    return "compute"


def policy_of(order: Sequence[Sequence[Op]]) -> dict[tuple[int, int], str]:
    """The policy of each (stage, microbatch) that has one (DESIGN.md 6.3): an R means
    ``recompute``, an O ``offload``; keep is absent."""
    found: dict[tuple[int, int], str] = {}
    for ops in order:
        for op in ops:
            if op.kind == "R":
                found[(op.stage, op.microbatch)] = "recompute"
            elif op.kind == "O":
                found[(op.stage, op.microbatch)] = "offload"
    return found
