"""The order in which unequal microbatches enter the pipeline (DESIGN.md 6.2).

With unequal microbatches the order of entry changes the cost: a long microbatch in the
warm-up or the cool-down stretches the bubble at the pipeline's ends, while in the steady
state its time is shared with the others'. A schedule renumbers its microbatches and says
so in ``microbatch_order``; `entry_orders` gives the candidate orders the solver tries and
`permuted` the profile with its microbatches in such an order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import Profile, parse_profile

# The fields that may hold a [stage][microbatch] matrix (DESIGN.md 6.2).
_MATRIX_FIELDS = ("t_f", "t_b", "t_w", "t_comm", "m_b", "m_w")


def entry_orders(problem: Problem) -> list[tuple[int, ...]]:
    """Candidate orders of entry, the input order first, without repeats.

    Longest first (the long ones overlap the most steady-state work), shortest first,
    shortest at both ends (the ends are where the pipeline fills and drains, so the
    short microbatches shorten the warm-up and the cool-down), and the input order.
    """
    m = problem.num_microbatches
    identity = tuple(range(m))
    if problem.uniform_microbatches:
        return [identity]
    size = problem.microbatch_sizes
    ascending = sorted(range(m), key=lambda j: (size[j], j))
    ends: list[int] = [0] * m
    left, right = 0, m - 1
    for i, j in enumerate(ascending):  # shortest at the ends, longest in the middle
        if i % 2 == 0:
            ends[left] = j
            left += 1
        else:
            ends[right] = j
            right -= 1
    candidates = [identity, tuple(reversed(ascending)), tuple(ascending), tuple(ends)]
    seen: list[tuple[int, ...]] = []
    for order in candidates:
        if order not in seen:
            seen.append(order)
    return seen


def permuted(profile: Profile, order: Sequence[int]) -> Profile:
    """`profile` with microbatch ``j`` being input microbatch ``order[j]``."""
    order = list(order)
    if order == list(range(profile.num_microbatches)):
        return profile
    data: dict[str, Any] = profile.model_dump(mode="json")
    for name in _MATRIX_FIELDS:
        value = data[name]
        if isinstance(value, list) and value and isinstance(value[0], list):
            data[name] = [[row[i] for i in order] for row in value]
    if data.get("microbatches"):
        data["microbatches"] = [data["microbatches"][i] for i in order]
    return parse_profile(data)


def inverse(order: Sequence[int]) -> list[int]:
    """The order that undoes `order`."""
    undo = [0] * len(order)
    for j, i in enumerate(order):
        undo[i] = j
    return undo
