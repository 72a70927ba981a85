"""`--method ilp` on a heuristic schedule that fits only thanks to fused BWs (m_w > m_b).

The exact models split every BW into B then W; where B holds more than F did (DESIGN.md
6.1) the split order breaks the limit, so the models cannot start from it. The solve must
keep the heuristic's schedule instead of failing an internal assertion.
"""

from __future__ import annotations

from ppsched.solver.exact.frame import split_fused
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import simulate
from ppsched.solver.solving import ExactOptions, solve

# Found by a random search over m_w up to 2.5 m_b: the heuristic fuses BWs to fit.
PROFILE = {"num_ranks": 4, "num_microbatches": 6, "t_f": [1.813, 1.15, 1.25, 1.949],
           "t_b": [2.161, 1.824, 1.4, 2.251], "t_w": [2.203, 1.322, 0.732, 1.795],
           "t_comm": 0.842, "m_b": [1.68, 1.82, 0.73, 1.51], "m_w": [3.69, 1.28, 0.84, 3.49],
           "memory_limit": 7.27}


def test_ilp_keeps_a_heuristic_schedule_the_models_cannot_split() -> None:
    profile = parse_profile(PROFILE)
    heuristic = solve(profile, "heuristic")
    orders = heuristic.orders()
    assert any(op.kind == "BW" for ops in orders for op in ops)
    assert not simulate(profile.problem, split_fused(orders)).ok  # the case this guards

    refined = solve(profile, "ilp", exact=ExactOptions(time_limit_s=2))
    assert refined.solver is not None and refined.metrics is not None
    assert refined.solver.status == "heuristic"
    assert refined.orders() == orders
    assert refined.metrics.cost == heuristic.metrics.cost  # type: ignore[union-attr]
    assert refined.solver.bound <= refined.metrics.cost
