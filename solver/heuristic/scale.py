"""How much of the heuristic searches an order gets: all of them up to `FULL_SEARCH_OPS`
ops, a fixed few candidates above.

Every candidate build of the searches places each op of the order once, in Python, at a
few microseconds an op. At p=128, m=1024 a V order has 786,432 ops, a build costs 1-7 s,
and the searches of the layouts 1, v and loop2 built about 60 of them (issue 27: 110 s CPU
and 1.7 GB at 0.5p). Above the threshold the searches keep the candidates that won on
the large cases measured (`benchmarks/scale.py`) and skip the rest. The threshold and the
candidates are counts, never clock readings, so the same input gives the same answer on
any machine and under any load; no profile of the public set, the randomized benchmark
or `benchmarks.answer_dump` (at most 49,152 ops in V) comes near it, so their answers are
those of the full search.
"""

from __future__ import annotations

from ppsched.solver.model.problem import Problem

FULL_SEARCH_OPS = 100_000
"""Ops of one layout's order (3 * stages * m) up to which the searches run whole."""

LARGE_WARMUP_FAMILIES = 2
"""Above the threshold, the single-chunk search builds this many warm-up families (its
first ones, the paper's rule of as many forwards as fit before the first B, and one
more where that leaves a rank idle), not all eight."""


def searched_in_full(problem: Problem) -> bool:
    """Whether the order is small enough for the whole search (`FULL_SEARCH_OPS`)."""
    return 3 * problem.num_stages * problem.num_microbatches <= FULL_SEARCH_OPS
