"""When a list-scheduling build (the heuristic's, the paper algorithm's) can give up.

A build places ops stage by stage in a fixed rule, so each stage ends no earlier than its
clock plus the work it still owes. Once that floor shows the build cannot beat the best
found so far, finishing it cannot change the answer: the search keeps only builds better
by `MARGIN`. After the warm-up the busiest stage rarely idles again, so on the paper's
profiles a losing build is known after one or two waves (issue 11: the knob search's 29
builds at p=32, m=256 cost 10x less).
"""

from __future__ import annotations

from collections.abc import Sequence

MARGIN = 1e-9
"""How much better than the incumbent a build must be to replace it."""


def is_checkpoint(wave: int) -> bool:
    """Whether a build asks at `wave` if it can still win: waves 1, 2, 4, 8, ... (a check
    costs a pass over the stages, and the answer is mostly known after wave 1)."""
    return wave > 0 and wave & (wave - 1) == 0


def cannot_win(ends: Sequence[float], first: Sequence[float], objective: str,
               incumbent: float) -> bool:
    """Whether a build whose stages end no earlier than `ends` (and started at `first`)
    cannot end `MARGIN` below `incumbent` by `objective` (``cost``: the largest span;
    ``makespan``: last end to first start).

    Half the margin is kept as slack, so the rounding of the floor's sums cannot make a
    build give up that would have been kept.
    """
    if objective == "makespan":
        value = max(ends) - min(first)
    else:
        value = max(end - start for end, start in zip(ends, first, strict=True))
    return value >= incumbent - MARGIN / 2
