"""Partitioning (DESIGN.md 6.7): a per-layer profile cut into one stage per rank, jointly
with the schedule: bound by a dynamic program over cuts, judged by the heuristic."""

from ppsched.solver.partition.baselines import blocks, even_cut, megatron_cuts, torchtitan_cut
from ppsched.solver.partition.cuts import Cut, CutCosts, all_cuts
from ppsched.solver.partition.judge import Judged, judge
from ppsched.solver.partition.search import (
    BOUND_SCOPE,
    Compared,
    Partition,
    best_by_exhaustion,
    partition,
)

__all__ = [
    "BOUND_SCOPE",
    "Compared",
    "Cut",
    "CutCosts",
    "Judged",
    "Partition",
    "all_cuts",
    "best_by_exhaustion",
    "blocks",
    "even_cut",
    "judge",
    "megatron_cuts",
    "partition",
    "torchtitan_cut",
]
