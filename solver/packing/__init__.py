"""Packing samples into microbatches and data-parallel replicas (DESIGN.md 6.2): the layer
above the schedule. `pack` is the entry point; `partition` holds the algorithms."""

from ppsched.solver.packing.cost import (
    CostModel,
    CostModelError,
    Quadratic,
    fit_quadratic,
    parse_coefficients,
)
from ppsched.solver.packing.lengths import LengthsError, check_lengths, read_lengths
from ppsched.solver.packing.partition import fill_in_order
from ppsched.solver.packing.plan import (
    MicrobatchPlan,
    Packing,
    PackingError,
    PackResult,
    PackSpec,
    ReplicaPlan,
    naive_samples,
    pack_samples,
    replica_profile,
    solve_replica,
    solve_replicas,
    split_replicas,
)
from ppsched.solver.packing.search import best_packing, fill_samples, pack, rebalance

__all__ = [
    "CostModel",
    "CostModelError",
    "LengthsError",
    "MicrobatchPlan",
    "PackResult",
    "PackSpec",
    "Packing",
    "PackingError",
    "Quadratic",
    "ReplicaPlan",
    "best_packing",
    "check_lengths",
    "fill_in_order",
    "fill_samples",
    "fit_quadratic",
    "naive_samples",
    "pack",
    "pack_samples",
    "parse_coefficients",
    "read_lengths",
    "rebalance",
    "replica_profile",
    "solve_replica",
    "solve_replicas",
    "split_replicas",
]
