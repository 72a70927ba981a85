"""What the searches decide on when microbatches are unequal (DESIGN.md 6.2).

The heuristic's and the greedy's searches read one value per stage. On unequal
microbatches they decide on a problem with alike ones (`Problem.for_decisions`: the mean
times and latencies) and the simulator times the order with the real values. Which
memory per microbatch to decide with is a trade-off: each stage's largest `m_b` and `m_w`
give an order that fits the limit for every microbatch, but below 1F1B's memory they
allow only as many in flight as the largest would, and the pipeline starves. Lower
quantiles allow more; their orders are kept only where the simulator finds them within
the limit with every microbatch's own memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from ppsched.solver.model.problem import Problem

# Quantiles of each stage's per-microbatch memory to decide with, besides the largest
# (1.0, always valid). On p = 8, m = 16 lognormal cases (sigma 0.5) at 1F1B's memory,
# 0.75 or 0.9 gave the best single-chunk order in 7 of 8 (`benchmarks.varmb_exact`).
MEMORY_QUANTILES = (1.0, 0.9, 0.75, 0.5)


def decision_problems(problem: Problem) -> Iterator[tuple[float, Problem]]:
    """(quantile, problem with alike microbatches) to decide orders on, the largest
    memory first; that one only when the microbatches are alike or the limit leaves
    room for 1F1B with the largest microbatches."""
    decide = problem.for_decisions()
    yield 1.0, decide
    # `decide` holds each stage's largest memory: 1F1B with the largest microbatches.
    if decide is problem or not decide.below_one_f_one_b():
        return
    seen = {(decide.m_b, decide.m_w)}
    for q in MEMORY_QUANTILES[1:]:
        m_b = tuple(_quantile(row, q) for row in problem.m_b_mb)
        m_w = tuple(_quantile(row, q) for row in problem.m_w_mb)
        if (m_b, m_w) in seen:
            continue
        seen.add((m_b, m_w))
        yield q, replace(decide, m_b=m_b, m_w=m_w)


def _quantile(values: tuple[float, ...], q: float) -> float:
    """The value at rank ``floor(q * n)`` of the sorted values (the largest for q = 1)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
