"""GPipe and 1F1B: the schedules every pipeline user compares with (fused backward, BW)."""

from __future__ import annotations

from ppsched.solver.generators.registry import register
from ppsched.solver.model.ops import Op, Orders
from ppsched.solver.model.problem import Problem


@register("gpipe", "GPipe: all forwards, then all backwards (fused BW); holds m activations")
def gpipe(problem: Problem) -> Orders:
    m = problem.num_microbatches
    return [[Op("F", s, j) for j in range(m)] + [Op("BW", s, j) for j in range(m)]
            for s in range(problem.num_ranks)]


@register("1f1b", "1F1B (PipeDream-flush): warm-up forwards, then one forward one backward")
def one_f_one_b(problem: Problem) -> Orders:
    return one_f_one_b_capped(problem, problem.num_ranks)


def one_f_one_b_capped(problem: Problem, max_in_flight: int) -> Orders:
    """1F1B with at most `max_in_flight` microbatches' activations held on any rank.

    Rank r runs ``min(p-1-r, max_in_flight-1)`` warm-up forwards, then alternates one F
    and one BW, then drains the remaining BWs. With ``max_in_flight = p`` this is plain
    1F1B; smaller values trade bubble for memory (the fallback for tight limits). Warm-up
    counts never grow down the pipeline, so the order cannot deadlock.
    """
    p, m = problem.num_ranks, problem.num_microbatches
    if max_in_flight < 1:
        raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
    orders = []
    for r, warmup in enumerate(one_f_one_b_warmup(p, max_in_flight, m)):
        ops = [Op("F", r, j) for j in range(warmup)]
        for j in range(m):  # steady state: F of a newer microbatch, then BW of the oldest
            if warmup + j < m:
                ops.append(Op("F", r, warmup + j))
            ops.append(Op("BW", r, j))
        orders.append(ops)
    return orders


def one_f_one_b_warmup(p: int, max_in_flight: int, m: int) -> list[int]:
    """The warm-up forwards per rank of `one_f_one_b_capped`."""
    return [min(p - 1 - r, max_in_flight - 1, m) for r in range(p)]
