"""The recompute pass: any named schedule with the first k stages' activations recomputed.

``NAME+recompute`` recomputes every stage's activations, ``NAME+recompute:K`` those of
the first K stages (model order, stages 0..K-1): what Megatron-LM's
``--recompute-num-layers`` and the Zero Bubble repository's ``--recompute-first-k``
style options do. Each recomputed ``F(s, j)`` keeps only ``m_ckpt[s]``; an ``R(s, j)`` runs
right before its ``B`` (or ``BW``) on the compute lane, Megatron's place, where the
recomputed tensors live the shortest (DESIGN.md 6.3). The first stages are chosen since
their activations live longest in 1F1B-like orders (stage s holds about p - s of them).
"""

from __future__ import annotations

import re

from ppsched.solver.generators.registry import Generator
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.ops import Op, Orders, parts
from ppsched.solver.model.policy_fields import policy_fields
from ppsched.solver.model.problem import Problem

SUFFIX = "+recompute"
_NAME = re.compile(r"^(?P<base>.+)\+recompute(?::(?P<stages>\d+))?$")


def split_recompute(name: str) -> tuple[str, int | None] | None:
    """``("1f1b", 2)`` for ``1f1b+recompute:2``, ``("1f1b", None)`` (every stage) for
    ``1f1b+recompute``; None for a name without the suffix."""
    match = _NAME.match(name)
    if not match:
        return None
    stages = match["stages"]
    return match["base"], int(stages) if stages is not None else None


def recompute_name(base: str, recompute_stages: int | None) -> str:
    """The method name of `base` with its first `recompute_stages` stages recomputed
    (None: every stage; 0: `base` itself)."""
    if recompute_stages == 0:
        return base
    return base + SUFFIX + (f":{recompute_stages}" if recompute_stages is not None else "")


def with_recompute(base: Generator, recompute_stages: int | None) -> Generator:
    """`base` followed by the recompute pass, as a generator of its own."""
    name = recompute_name(base.name, recompute_stages)
    which = "every stage" if recompute_stages is None else f"the first {recompute_stages} "\
        "stages"

    def generate(problem: Problem) -> Orders:
        return recompute_pass(problem, base(problem), recompute_stages, name)

    return Generator(name, generate, f"{base.summary}; activations of {which} recomputed "
                     "before their backward", base.num_chunks, base.placement)


def recompute_pass(problem: Problem, orders: Orders, recompute_stages: int | None,
                   method: str = SUFFIX) -> Orders:
    """`orders` with an ``R`` right before the ``B``/``BW`` of every (stage, microbatch)
    of the first `recompute_stages` stages (None: all). FB ops (DESIGN.md 6.4) run as
    their two parts, since a recompute attaches to a plain backward.

    Raises:
        ProfileError: the profile offers no recompute (neither ``t_r`` nor ``m_ckpt``), or
            `recompute_stages` is not 0..p*v (field ``recompute_stages``).
    """
    num_stages = problem.num_stages
    if recompute_stages is not None and not 0 <= recompute_stages <= num_stages:
        raise ProfileError("recompute_stages", recompute_stages,
                           f"0..{num_stages} (the profile's p*v stages) for '{method}'")
    if not policy_fields(problem).can_recompute:
        raise ProfileError("t_r", None, f"t_r or m_ckpt set in the profile (the time of a "
                           f"recompute and the checkpoint it keeps) for '{method}'")
    first = num_stages if recompute_stages is None else recompute_stages
    out: Orders = []
    for ops in orders:
        row: list[Op] = []
        for op in (part for compute in ops for part in parts(compute)):
            if op.kind in ("B", "BW") and op.stage < first:
                row.append(Op("R", op.stage, op.microbatch))
            row.append(op)
        out.append(row)
    return out
