"""Interleaved 1F1B (Megatron-LM's virtual pipeline, "1F1B-I"; Narayanan et al. 2021, 2.2).

Loop placement: rank r runs stages r, r+p, ..., r+(v-1)p. Forwards go through a rank's
chunks in groups of microbatches, so that a microbatch's activation returns to the rank
for its next chunk while the rank works on the rest of the group. The backward is fused
(BW). Bubble for identical stages and no latency: (p-1)/v (T_F+T_B+T_W), with T the
times of the whole rank's share of the model (v stages' worth).

When p does not divide m, the microbatches form ``m // p`` rounds of equal size (torch.
distributed.pipelining's rule for Megatron's order): that needs the round count to divide
m; other counts are refused with the nearest ones that work. (Megatron-LM's own remainder
group, a short last group under the same warm-up, deadlocks under this cost model, e.g.
p = 6, m = 8.)
"""

from __future__ import annotations

from collections.abc import Callable

from ppsched.solver.generators.registry import register
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.ops import Op, Orders
from ppsched.solver.model.problem import Problem


@register("1f1b-interleaved", "Interleaved 1F1B (Megatron's virtual pipeline, loop "
          "placement): chunk-wise groups of p microbatches, fused BW",
          num_chunks=(), placement="loop")
def interleaved_1f1b(problem: Problem) -> Orders:
    p, v, m = problem.num_ranks, problem.num_chunks, problem.num_microbatches
    # Megatron's warm-up: the (v-1) groups that must pass through the earlier chunks
    # before the last chunk's first backward, plus two forwards per rank downstream.
    return grouped_orders(problem, round_size(m, p),
                          lambda r, group: (p - 1 - r) * 2 + (v - 1) * group)


def grouped_orders(problem: Problem, group: int,
                   warmup_of: Callable[[int, int], int]) -> Orders:
    """Chunk-wise groups of `group` microbatches with fused backwards: per rank r,
    ``warmup_of(r, group)`` forwards, then one forward and one backward at a time, then
    the remaining backwards (Megatron's interleaved order; PipeOffload's with its own
    warm-up)."""
    p, v, m = problem.num_ranks, problem.num_chunks, problem.num_microbatches
    table = schedule_table(m, v, group)
    total = m * v
    orders = []
    for r in range(p):
        warmup = min(warmup_of(r, group), total)

        def forward(k: int, r: int = r) -> Op:
            microbatch, chunk = table[k]
            return Op("F", chunk * p + r, microbatch)

        def backward(k: int, r: int = r) -> Op:
            microbatch, chunk = table[k]
            return Op("BW", (v - 1 - chunk) * p + r, microbatch)  # chunks in reverse

        # Step 1 (warm-up): forwards only.
        ops = [forward(k) for k in range(warmup)]
        # Step 2 (steady state): one forward, then one backward.
        for k in range(total - warmup):
            ops.append(forward(warmup + k))
            ops.append(backward(k))
        # Step 3 (cool-down): the remaining backwards.
        ops += [backward(k) for k in range(total - warmup, total)]
        orders.append(ops)
    return orders


def round_size(num_microbatches: int, num_ranks: int) -> int:
    """Microbatches per round: p when p divides m, else m split into m // p equal rounds.

    Raises:
        ProfileError: when m // p rounds cannot split m evenly, naming counts that can.
    """
    m, p = num_microbatches, num_ranks
    rounds = max(1, m // p)
    if m % rounds:
        near = [x for x in range(max(1, m - 2 * p), m + 2 * p)
                if x % max(1, x // p) == 0]
        below = max(x for x in near if x < m)
        above = min(x for x in near if x > m)
        raise ProfileError("num_microbatches", m,
                           f"a count that m // p = {rounds} rounds split evenly for "
                           f"interleaved 1F1B with p = {p}, such as {below} or {above}")
    return m // rounds


def schedule_table(num_microbatches: int, num_chunks: int, group: int) -> list[tuple[int, int]]:
    """Megatron's order of (microbatch, chunk) for a rank's forwards (and backwards).

    Microbatches go in groups of `group` (which divides their count): each group runs
    through chunk 0, then chunk 1, and so on.
    """
    table: list[tuple[int, int]] = []
    for first in range(0, num_microbatches, group):
        table += [(j, chunk) for chunk in range(num_chunks)
                  for j in range(first, first + group)]
    return table
