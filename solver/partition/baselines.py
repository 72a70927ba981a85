"""The cuts users get today, as functions of a per-layer profile: the even split of the
transformer blocks, torchtitan's rule, and Megatron's first/last-stage adjustment.

All three spread *blocks* (the repeated transformer layers); the layers before the first
block (the embedding) go with the first stage and those after the last (final norm, LM
head) with the last, as both frameworks place them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ppsched.solver.integrations import torchtitan_stage_layers
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.layers import LayerProfile
from ppsched.solver.partition.cuts import Cut

# A block's name ends in its index: layers.0, h.11, blocks.3 (torchtitan, HF GPT-2, ...).
_BLOCK = re.compile(r"(^|\.)\d+$")


def blocks(layers: LayerProfile) -> tuple[int, int]:
    """The [first, end) indices of the transformer blocks among `layers`' layers.

    Blocks are the layers whose names end in a number; without any, every layer but the
    first and the last.

    Raises:
        ProfileError: numbered layers that are not one contiguous run.
    """
    numbered = [i for i, x in enumerate(layers.layers) if _BLOCK.search(x.name)]
    if not numbered:
        return 1, max(1, len(layers.layers) - 1)
    first, last = numbered[0], numbered[-1]
    if len(numbered) != last - first + 1:
        raise ProfileError("layers", [x.name for x in layers.layers[first:last + 1]],
                           "the numbered layers (the transformer blocks) in one run, the "
                           "embedding before them and the head after them")
    return first, last + 1


def _with_ends(layers: LayerProfile, per_stage: tuple[int, ...]) -> Cut | None:
    """Blocks per stage to layers per stage (the ends joined to the end stages); None
    when a stage ends up with no layer."""
    first, end = blocks(layers)
    cut = list(per_stage)
    cut[0] += first
    cut[-1] += len(layers.layers) - end
    return tuple(cut) if min(cut) >= 1 and sum(cut) == len(layers.layers) else None


def even_cut(layers: LayerProfile) -> Cut | None:
    """The blocks split as evenly as possible (the remainder to the first stages)."""
    first, end = blocks(layers)
    base, extra = divmod(end - first, layers.num_ranks)
    return _with_ends(layers, tuple(base + (s < extra) for s in range(layers.num_ranks)))


def torchtitan_cut(layers: LayerProfile) -> Cut | None:
    """torchtitan's split (the embedding and the output weigh one block each), as
    `ppsched torchtitan --layers` computes it; None where torchtitan refuses the count."""
    first, end = blocks(layers)
    try:
        per_stage = torchtitan_stage_layers(layers.num_ranks, end - first)
    except ProfileError:
        return None
    return _with_ends(layers, per_stage)


def megatron_cuts(layers: LayerProfile) -> Iterator[tuple[int, int, Cut]]:
    """Every Megatron ``--decoder-first-pipeline-num-layers A`` and ``--decoder-last-
    pipeline-num-layers B`` a user tuning them would try: at most as many blocks on the
    end stages as on each middle one, the middle stages' count divisible (Megatron asserts
    it). Yields (A, B, cut)."""
    p = layers.num_ranks
    first, end = blocks(layers)
    total = end - first
    if p == 1:  # one stage is the first and the last
        yield total, total, (len(layers.layers),)
        return
    if p == 2:
        for a in range(total + 1):
            cut = _with_ends(layers, (a, total - a))
            if cut is not None:
                yield a, total - a, cut
        return
    for k in range(1, total // (p - 2) + 1):
        rest = total - k * (p - 2)
        for a in range(max(0, rest - k), min(k, rest) + 1):
            cut = _with_ends(layers, (a, *(k,) * (p - 2), rest - a))
            if cut is not None:
                yield a, rest - a, cut
