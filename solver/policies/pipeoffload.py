"""PipeOffload's schedules (Wan et al. 2025, arXiv 2503.01328): interleaved 1F1B that
offloads activations to host memory, on the copy lanes of DESIGN.md 6.3.

The compute order (the paper's generalised interleaving, section 4): loop placement,
microbatches in groups of ``g`` with ``ceil(p/2) <= g <= p`` (the smallest such ``g``
that divides ``m``: smaller groups hold fewer activations; Megatron's interleaving is
``g = p``), each group through chunk 0, then chunk 1, and so on. Warm-up forwards are
postponed as late as possible: rank r runs ``(p-1-r) + (v-1) g`` forwards before its
first backward (Megatron runs ``2(p-1-r) + (v-1) g``; the extra ones only come early and
are held longer), then one forward, one fused backward. The backward is fused (BW).

Offload, longest lifespan first (section 3): timed once keeping everything, activations
are taken from the longest lived down, and each one whose lifespan holds its offload and
reload is offloaded (``O`` right after its ``F``, ``L`` issued as late as lets it land
before its ``BW``: `solver.policies.with_policies`). ``pipeoffload-selective`` offloads
the first chunk's activations only (they live longest: a microbatch's chunk 0 waits for
every later chunk's forward and backward); ``pipeoffload-full`` all. With a
``host_memory_limit`` the shortest lived are dropped until the host holds them.
"""

from __future__ import annotations

import math

from ppsched.solver.generators.interleaved import grouped_orders
from ppsched.solver.generators.registry import register
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.ops import Orders
from ppsched.solver.model.policy_fields import policy_fields
from ppsched.solver.model.problem import Problem

_EPS = 1e-9


@register("pipeoffload-full", "PipeOffload: interleaved 1F1B in groups of ceil(p/2)..p "
          "microbatches, warm-up postponed, every activation with room for its copies "
          "offloaded (needs t_offload)", num_chunks=(), placement="loop")
def pipeoffload_full(problem: Problem) -> Orders:
    return pipeoffload(problem, selective=False)


@register("pipeoffload-selective", "PipeOffload: interleaved 1F1B in groups of ceil(p/2)..p "
          "microbatches, warm-up postponed, the first chunk's activations offloaded "
          "(needs t_offload)", num_chunks=(), placement="loop")
def pipeoffload_selective(problem: Problem) -> Orders:
    return pipeoffload(problem, selective=True)


def group_size(num_microbatches: int, num_ranks: int) -> int:
    """The smallest ``g`` in ``[ceil(p/2), p]`` that divides ``m``.

    Raises:
        ProfileError: ``num_microbatches`` with no such divisor, naming counts that have.
    """
    m, p = num_microbatches, num_ranks
    low = -(-p // 2)
    for g in range(low, p + 1):
        if m % g == 0:
            return g
    near = [x for x in range(max(1, m - p), m + p + 1)
            if any(x % g == 0 for g in range(low, p + 1))]
    raise ProfileError("num_microbatches", m, f"a multiple of one of {low}..{p} (the "
                       f"PipeOffload group sizes for p = {p}), such as "
                       f"{max(x for x in near if x < m) if any(x < m for x in near) else p}"
                       f" or {min(x for x in near if x > m)}")


def grouped_interleaved(problem: Problem) -> Orders:
    """The compute order of the module docstring (F and BW only)."""
    p, v, m = problem.num_ranks, problem.num_chunks, problem.num_microbatches
    # Warm-up postponed: only the forwards the first backward waits for.
    return grouped_orders(problem, group_size(m, p),
                          lambda r, group: (p - 1 - r) + (v - 1) * group)


def pipeoffload(problem: Problem, selective: bool) -> Orders:
    """The orders of ``pipeoffload-selective`` (True) or ``pipeoffload-full`` (False).

    Raises:
        ProfileError: the profile offers no offload (field ``t_offload``), or ``m`` has
            no group size (field ``num_microbatches``).
    """
    # solver.policies imports the generators' registry: imported here, when first used.
    from ppsched.solver.policies.fit import OFFLOAD, keep_only, lives, with_policies
    from ppsched.solver.sim.simulator import simulate

    name = "pipeoffload-selective" if selective else "pipeoffload-full"
    fields = policy_fields(problem)
    if not fields.can_offload:
        raise ProfileError("t_offload", None, "t_offload (or t_reload) set in the profile "
                           f"for schedule '{name}' (e.g. "
                           "ppsched.solver.model.offload_sizing.with_offload "
                           "for an offload time ratio k)")
    compute = grouped_interleaved(problem)
    keep = simulate(keep_only(problem, (math.inf,) * problem.num_ranks), compute)
    assert keep.ok, keep.violations  # the postponed warm-up never deadlocks (tested)
    life = lives(problem, keep)
    keep_start = {op: t for ops, starts in zip(keep.order, keep.start, strict=True)
                  for op, t in zip(ops, starts, strict=True) if t is not None}
    p = problem.num_ranks
    # Longest lifespan first; only those whose lifespan holds both copies.
    chosen = [key for key, span in sorted(((k, x.span) for k, x in life.items()),
                                          key=lambda item: -item[1])
              if (not selective or key[0] < p)
              and span >= fields.t_offload[key[0]] + fields.t_reload[key[0]] - _EPS]
    while True:
        orders = with_policies(problem, compute, dict.fromkeys(chosen, OFFLOAD), life,
                               keep_start)
        sim = simulate(problem, orders)
        if not any(v.kind == "host_memory" for v in sim.violations) or not chosen:
            return orders
        chosen = chosen[: len(chosen) * 3 // 4]  # the shortest lived leave first
