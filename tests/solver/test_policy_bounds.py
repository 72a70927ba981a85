"""The lower bound with policies (solver/model/bounds.py `policy_lower_bound`) and the CP-SAT
model with policies (solver/exact/cpsat_policies.py), held against exhaustive search on tiny
pipelines: every policy per activation and every list order of the compute and copy ops
(an O right after its F, where it frees memory soonest) is simulated."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from ppsched.solver.exact.cpsat_policies import solve_cpsat_policies
from ppsched.solver.model.bounds import lower_bound, memory_chain_bound, policy_lower_bound
from ppsched.solver.model.ops import Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import Profile, parse_profile
from ppsched.solver.sim.simulator import simulate, validate
from ppsched.solver.solving import ExactOptions, solve
from ppsched.solver.solving.pipeline import heuristic_orders

Chain = list[tuple[Op, ...]]


def _interleavings(chains: list[Chain]) -> Iterator[list[Op]]:
    """Every merge of the chains that keeps each chain's order (a chain item may glue
    ops that stay together)."""
    chains = [chain for chain in chains if chain]
    if not chains:
        yield []
        return
    for i, chain in enumerate(chains):
        rest = [*chains[:i], chain[1:], *chains[i + 1:]]
        for tail in _interleavings(rest):
            yield [*chain[0], *tail]


def _chain(stage: int, j: int, policy: str) -> Chain:
    F, B, W = (Op(k, stage, j) for k in ("F", "B", "W"))  # type: ignore[arg-type]
    if policy == "recompute":
        return [(F,), (Op("R", stage, j),), (B,), (W,)]  # type: ignore[arg-type]
    if policy == "offload":
        return [(F, Op("O", stage, j)), (Op("L", stage, j),), (B,), (W,)]  # type: ignore[arg-type]
    return [(F,), (B,), (W,)]


def _rank_orders(problem: Problem, rank: int, policies: tuple[str, ...]) -> list[list[Op]]:
    found = []
    for choice in itertools.product(policies, repeat=problem.num_microbatches):
        chains = [_chain(rank, j, p) for j, p in enumerate(choice)]
        found.extend(_interleavings(chains))
    return found


def _fifo(order: list[list[Op]]) -> bool:
    for ops in order:
        for kind in ("B", "W"):
            seen = [op.microbatch for op in ops if op.kind == kind]
            if seen != sorted(seen):
                return False
    return True


def _valid_costs(problem: Problem, per_rank: list[list[list[Op]]],
                 ) -> Iterator[tuple[float, bool]]:
    for combo in itertools.product(*per_rank):
        sim = simulate(problem, list(combo))
        if sim.ok and sim.metrics is not None:
            yield sim.metrics.cost, _fifo(list(combo))


def _tiny(**fields: Any) -> Problem:
    data = {"num_ranks": 2, "num_microbatches": 2, "t_f": 1.0, "t_b": 1.0, "t_w": 1.0,
            "t_comm": 0.0, "m_b": 1.0, "m_w": 0.5, "memory_limit": 1.0}
    data.update(fields)
    return parse_profile(data).problem


def test_recompute_bound_holds_over_every_schedule() -> None:
    problem = _tiny(t_r=1.0, m_ckpt=0.0, memory_limit=1.5)
    assert problem.can_recompute and not problem.can_offload
    policies = ("keep", "recompute")
    per_rank = [_rank_orders(problem, r, policies) for r in range(2)]
    costs = [cost for cost, _ in _valid_costs(problem, per_rank)]
    bound = lower_bound(problem)
    assert bound == policy_lower_bound(problem)
    assert costs and min(costs) >= bound - 1e-9
    # The memory term: rank 0 cannot hold both activations, so it waits or recomputes.
    assert bound > problem.simple_lower_bound


def test_offload_bound_holds_over_every_schedule() -> None:
    problem = _tiny(t_offload=0.5, t_r=1.0, memory_limit=1.0)
    assert problem.can_offload and problem.can_recompute
    everything = ("keep", "recompute", "offload")
    bound = lower_bound(problem)
    costs: list[float] = []
    for free in range(2):  # one rank free to choose any policy, the other keeps
        per_rank = [_rank_orders(problem, r, everything if r == free else ("keep",))
                    for r in range(2)]
        costs += [cost for cost, _ in _valid_costs(problem, per_rank)]
    assert costs and min(costs) >= bound - 1e-9


def test_keep_memory_bound_would_be_wrong_underwith_offload() -> None:
    # Why the memory terms go: an offload schedule beats the keep-only memory bound.
    problem = _tiny(t_offload=0.25, num_microbatches=3, memory_limit=1.0)
    orders, _, cost = heuristic_orders(problem)
    validate(problem, orders)
    assert cost >= lower_bound(problem) - 1e-9
    keep_bound = max(memory_chain_bound(problem, r) for r in range(2))
    assert lower_bound(problem) <= keep_bound


def test_cpsat_with_policies_never_worse_and_bound_sound() -> None:
    problem = _tiny(t_r=1.0, m_ckpt=0.0, memory_limit=1.5)
    per_rank = [_rank_orders(problem, r, ("keep", "recompute")) for r in range(2)]
    fifo_best = min(cost for cost, fifo in _valid_costs(problem, per_rank) if fifo)
    orders, _, heuristic_cost = heuristic_orders(problem)
    result = solve_cpsat_policies(problem, orders, time_limit_s=10, workers=1, seed=0)
    assert result.orders is not None and result.objective is not None
    sim = validate(problem, result.orders)
    assert sim.metrics is not None
    assert result.objective == pytest.approx(sim.metrics.cost)
    assert result.objective <= heuristic_cost + 1e-9
    assert result.bound <= fifo_best + 1e-9  # the model's bound holds over FIFO schedules
    assert result.objective >= fifo_best - 1e-9 or not _fifo(result.orders)


def test_ilp_routes_policies_through_cpsat() -> None:
    data = {"num_ranks": 2, "num_microbatches": 3, "t_f": 1.0, "t_b": 1.0, "t_w": 1.0,
            "m_b": 1.0, "m_w": 0.5, "memory_limit": 1.0, "t_offload": 0.25, "t_r": 1.0}
    profile = parse_profile(data)
    heuristic = solve(profile, "heuristic")
    exact = solve(profile, "ilp", exact=ExactOptions(time_limit_s=5, workers=1, seed=0))
    assert exact.metrics is not None and heuristic.metrics is not None
    assert exact.metrics.cost <= heuristic.metrics.cost + 1e-9
    validate(Profile.model_validate(exact.profile.model_dump()).problem, exact.orders())
    assert exact.solver is not None and exact.solver.backend == "cpsat"
    assert exact.solver.bound <= exact.metrics.cost + 1e-9
    with pytest.raises(ValueError, match="backend"):
        solve(profile, "ilp", exact=ExactOptions(backend="milp", time_limit_s=1))
