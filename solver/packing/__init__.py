"""Packing samples into microbatches and data-parallel replicas (DESIGN.md 6.2): the layer
above the schedule. `pack` is the entry point; `partition` holds the algorithms."""

from solver.packing.cost import CostModel, CostModelError, Quadratic, fit_quadratic
from solver.packing.lengths import LengthsError, check_lengths, read_lengths
from solver.packing.pack import (
    MicrobatchPlan,
    Packing,
    PackingError,
    PackResult,
    PackSpec,
    ReplicaPlan,
    naive_samples,
    pack,
    pack_samples,
    replica_profile,
    solve_replicas,
)

__all__ = ["CostModel", "CostModelError", "LengthsError", "MicrobatchPlan", "PackResult",
           "PackSpec", "Packing", "PackingError", "Quadratic", "ReplicaPlan",
           "check_lengths", "fit_quadratic", "naive_samples", "pack", "pack_samples",
           "read_lengths", "replica_profile", "solve_replicas"]
