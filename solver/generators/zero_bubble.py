"""The Zero Bubble paper's handcrafted schedules ZB-H1 and ZB-H2 (its section 2, Figure 3).

Both are 1F1B with the backward split into B and W and each rank's W deferred: the B
chain then reaches the first rank sooner, and the deferred Ws fill what 1F1B leaves idle.
"""

from __future__ import annotations

from ppsched.solver.generators.registry import register
from ppsched.solver.model.ops import Op, Orders
from ppsched.solver.model.problem import Problem


@register("zb-h1", "ZB-H1: 1F1B with split backward; rank r defers r Ws; 1F1B's memory")
def zb_h1(problem: Problem) -> Orders:
    # Rank r keeps 1F1B's warm-up (p-1-r forwards), so it holds p-r activations at most;
    # deferring r Ws adds r*m_w, which stays under rank 0's p*m_b while m_w <= m_b
    # (with m_w > m_b, DESIGN.md 6.1, the simulator's peak says what it needs).
    # Bubble (p-1)(T_F + T_B - T_W) for identical stages.
    p = problem.num_ranks
    return split_one_f_one_b(problem, warmup=zb_h1_warmup(p), w_delay=list(range(p)))


def zb_h1_warmup(p: int) -> list[int]:
    """ZB-H1's warm-up forwards per rank (1F1B's)."""
    return [p - 1 - r for r in range(p)]


def zb_h2_warmup(p: int) -> list[int]:
    """ZB-H2's warm-up forwards per rank (twice 1F1B's)."""
    return [2 * (p - 1 - r) for r in range(p)]


@register("zb-h2", "ZB-H2: twice the warm-up, rank r defers 2r Ws; zero bubble at (2p-1) m_b")
def zb_h2(problem: Problem) -> Orders:
    # Rank r warms up with 2(p-1-r) forwards, enough to cover the round trip of the first
    # microbatch, and defers 2r Ws to the cool-down: (2p-1)*m_b on rank 0 at most.
    # Bubble (p-1)(T_F + T_B - 2T_W) where that is >= 0, given enough microbatches.
    p = problem.num_ranks
    return split_one_f_one_b(problem, warmup=zb_h2_warmup(p), w_delay=[2 * r for r in range(p)])


def split_one_f_one_b(problem: Problem, warmup: list[int], w_delay: list[int]) -> Orders:
    """1F1B with split backward: per rank, `warmup` forwards, then steps of F, B and the W
    of `w_delay` steps before, then the deferred Ws.

    Args:
        problem: a single-chunk problem (rank r runs stage r).
        warmup: forwards before the first B, per rank; must not grow down the pipeline.
        w_delay: how many steps each rank's W lags its B.
    """
    m = problem.num_microbatches
    orders = []
    for r in range(problem.num_ranks):
        # Step 1 (warm-up): forwards only.
        num_warmup = min(warmup[r], m)
        ops = [Op("F", r, j) for j in range(num_warmup)]
        # Step 2 (main step): F of a newer microbatch, B of the oldest, a deferred W.
        done_w = 0
        for j in range(m):
            if num_warmup + j < m:
                ops.append(Op("F", r, num_warmup + j))
            ops.append(Op("B", r, j))
            if j - w_delay[r] >= 0:
                ops.append(Op("W", r, j - w_delay[r]))
                done_w = j - w_delay[r] + 1
        # Step 3 (cool-down): the deferred Ws fill the tail.
        ops += [Op("W", r, j) for j in range(done_w, m)]
        orders.append(ops)
    return orders
