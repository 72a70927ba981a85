"""The four WeiPipe programs of the slides (seeds/weipipe-slides.txt), as ring steps.

Every rank runs the same program on its own microbatches: a list of *steps*, each a short
list of ops on weight chunks. Rank r runs its step l after rank r-1 ran step l (it needs the
weight chunks r-1 just used), so a program is the whole schedule; `simulator` times it.

Modelling choices (the slides draw the programs for p = 4 and leave these open):

- **Naive**: one microbatch at a time: F on chunks 0..p-1, then the fused backward BW on
  chunks p-1..0; one op per step.
- **Interleave**: after microbatch 0's forward, each step pairs the F of chunk k of the
  next microbatch with the BW of chunk p-1-k of the current one (the slides' "backward
  with W_3 while forward with W_0").
- **Zero-Bubble-1** (WZB1): the backward split into B and W. Each B runs as its own step
  (it is the critical path of the ring); each W is paired with the next microbatch's F.
  The W pass goes p-1..0, like B. The longest step is then T_F+T_W, which is what the
  slides' closed form `(P-1)/(N(1+T_B/(T_F+T_W))+P-1)` charges for the fill.
- **Zero-Bubble-2** (WZB2): as WZB1, but all of a microbatch's B passes come first
  (p-1..0) and its W passes follow in forward order 0..p-1, each beside the next
  microbatch's F *of the same chunk* (one weight chunk serves both). The last W of chunk
  k ends p ring steps before the next training step's F of chunk k would start, so the
  next step's fill overlaps this one's drain (over `num_iterations`); WZB1's last W is on
  chunk 0, which the next step needs first, so it cannot overlap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ppsched.solver.model.errors import ProfileError

KINDS = ("F", "B", "W", "BW")
GRAD_KINDS = ("W", "BW")  # ops that produce a chunk's weight gradient D


class WOp(NamedTuple):
    """One op of a WeiPipe program: ``kind`` on weight ``chunk`` for the rank's local
    ``microbatch`` of training step ``iteration``."""

    kind: str
    chunk: int
    microbatch: int
    iteration: int = 0

    def cell(self) -> str:
        """Short text, e.g. ``F3.1`` (kind, chunk, microbatch)."""
        suffix = f"'{self.iteration}" if self.iteration else ""
        return f"{self.kind}{self.chunk}.{self.microbatch}{suffix}"


Step = tuple[WOp, ...]
Program = list[Step]


def _naive(p: int, n: int, it: int) -> Program:
    steps: Program = []
    for j in range(n):
        steps += [(WOp("F", k, j, it),) for k in range(p)]
        steps += [(WOp("BW", k, j, it),) for k in reversed(range(p))]
    return steps


def _interleave(p: int, n: int, it: int) -> Program:
    steps: Program = [(WOp("F", k, 0, it),) for k in range(p)]
    for j in range(n):
        for k in range(p):
            # The backward first: it frees a chunk's activations before the F adds one,
            # so a rank holds one microbatch's activations (the slides' G*M_A), not more.
            back = WOp("BW", p - 1 - k, j, it)
            steps.append((back, WOp("F", k, j + 1, it)) if j + 1 < n else (back,))
    return steps


def _zb1(p: int, n: int, it: int) -> Program:
    steps: Program = [(WOp("F", k, 0, it),) for k in range(p)]
    for j in range(n):
        for k in range(p):
            c = p - 1 - k
            steps.append((WOp("B", c, j, it),))
            w = WOp("W", c, j, it)
            steps.append((w, WOp("F", k, j + 1, it)) if j + 1 < n else (w,))
    return steps


def _zb2(p: int, n: int, it: int) -> Program:
    steps: Program = [(WOp("F", k, 0, it),) for k in range(p)]
    for j in range(n):
        steps += [(WOp("B", c, j, it),) for c in reversed(range(p))]
        for k in range(p):
            w = WOp("W", k, j, it)
            steps.append((w, WOp("F", k, j + 1, it)) if j + 1 < n else (w,))
    return steps


def _repeat(build: Callable[[int, int, int], Program]) -> Callable[[int, int, int], Program]:
    def program(p: int, n: int, iterations: int) -> Program:
        return [step for it in range(iterations) for step in build(p, n, it)]
    return program


SCHEDULES: dict[str, tuple[Callable[[int, int, int], Program], str]] = {
    "weipipe-naive": (_repeat(_naive), "WeiPipe-Naive: one microbatch at a time, F then "
                      "fused backward, one op per ring step"),
    "weipipe-interleave": (_repeat(_interleave), "WeiPipe-Interleave: the next microbatch's "
                           "F beside the current one's fused backward in every ring step"),
    "weipipe-zb1": (_repeat(_zb1), "WeiPipe-Zero-Bubble-1: split backward; B alone, each W "
                    "beside the next microbatch's F"),
    "weipipe-zb2": (_repeat(_zb2), "WeiPipe-Zero-Bubble-2: all B first, then W in forward "
                    "order beside the next F of the same chunk; steps overlap across "
                    "iterations"),
}


def build_program(name: str, num_ranks: int, num_microbatches: int,
                  num_iterations: int = 1) -> Program:
    """The program (list of ring steps) of WeiPipe schedule `name`.

    Raises:
        ProfileError: an unknown name (the message lists the valid ones).
    """
    try:
        build = SCHEDULES[name][0]
    except KeyError:
        raise ProfileError("method", name, "one of " + ", ".join(SCHEDULES)) from None
    return build(num_ranks, num_microbatches, num_iterations)
