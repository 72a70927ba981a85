"""The V placement's memory relaxation bound (`solver.v_relaxation`): never above the
optimum of an exhaustive search, never above a schedule, and above the closed forms
where memory binds."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from ppsched.solver.exact.v_relaxation import (
    applies,
    memory_binds,
    v_memory_relaxation_bound,
    v_rank_relaxation_bound,
)
from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.ops import Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import memory_delta, simulate
from ppsched.solver.solving import ExactOptions, solve
from ppsched.solver.solving.pipeline import heuristic_orders

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def _v_case(p: int, m: int, seed: int, tight: bool = False) -> Problem:
    """A one-chunk profile with fractional times, latencies up to 6x the op times and
    m_w <= m_b, cut in V, with each rank's limit from one microbatch's activations of its
    two stages to m of them (`tight`: one)."""
    rng = random.Random(seed * 7919 + p * 10 + m)
    m_b = [rng.choice([0.5, 1.0, 1.5]) for _ in range(p)]
    one = parse_profile({
        "num_ranks": p, "num_microbatches": m,
        "t_f": [rng.choice([0.25, 0.5, 1.0, 1.5]) for _ in range(p)],
        "t_b": [rng.choice([0.25, 0.5, 1.0, 2.0]) for _ in range(p)],
        "t_w": [rng.choice([0.0, 0.25, 1.0, 2.0]) for _ in range(p)],
        "t_comm": [rng.choice([0.0, 0.5, 2.0, 6.0]) for _ in range(p - 1)],
        "m_b": m_b, "m_w": [rng.choice([0.0, 0.5, 1.0]) * x for x in m_b]})
    v = with_chunks(one, 2, "v")
    need = [v.problem.m_b[r] + v.problem.m_b[2 * p - 1 - r] for r in range(p)]
    limit = [x if tight else round(x * rng.uniform(1.0, m), 2) + 0.01 for x in need]
    return parse_profile({**v.model_dump(exclude_none=True), "memory_limit": limit}).problem


def _extensions(ops: list[Op], before: dict[Op, list[Op]], problem: Problem,
                rank: int) -> Iterator[list[Op]]:
    """Every order of `ops` that runs each op after those in `before[op]` (its
    microbatch's ops the rank needs first) and stays within the rank's limit."""
    order: list[Op] = []
    placed: set[Op] = set()

    def extend(held: float) -> Iterator[list[Op]]:
        if len(order) == len(ops):
            yield list(order)
            return
        for op in ops:
            if op in placed or any(x not in placed for x in before[op]):
                continue
            now = held + memory_delta(problem, op)
            if now > problem.memory_limit[rank] + 1e-9:
                continue
            order.append(op)
            placed.add(op)
            yield from extend(now)
            order.pop()
            placed.discard(op)

    yield from extend(0.0)


def _one_rank_optimum(problem: Problem) -> float:
    """The least cost over every valid order of a V pipeline on one rank (stages 0 and 1).

    B and W run split: with m_w <= m_b a fused BW, timed as B then W, holds no less, so
    the split orders reach the optimum."""
    assert problem.num_ranks == 1
    before: dict[Op, list[Op]] = {}
    for j in range(problem.num_microbatches):
        f0, f1, b1, b0 = Op("F", 0, j), Op("F", 1, j), Op("B", 1, j), Op("B", 0, j)
        before.update({f0: [], f1: [f0], b1: [f1], b0: [b1],
                       Op("W", 1, j): [b1], Op("W", 0, j): [b0]})
    best = float("inf")
    for order in _extensions(list(before), before, problem, 0):
        sim = simulate(problem, [order])
        if sim.ok and sim.metrics is not None:
            best = min(best, sim.metrics.cost)
    assert best < float("inf"), "no valid schedule: a bound held against it would pass vacuously"
    return best


@pytest.mark.parametrize("seed", range(24))
def test_never_above_the_exhaustive_optimum(seed: int) -> None:
    problem = _v_case(1, 2, seed)
    assert applies(problem)
    bound = v_rank_relaxation_bound(problem, 0, deterministic_s=5.0).bound
    assert bound <= _one_rank_optimum(problem) + 1e-9


def test_closes_on_one_rank_where_memory_binds() -> None:
    # On one rank the relaxation keeps the whole pipeline: it must prove the exhaustive
    # optimum (or a test with a bound of 0 would pass above).
    closed = 0
    for seed in range(24):
        problem = _v_case(1, 2, seed)
        if not memory_binds(problem, 0):
            continue
        relaxed = v_rank_relaxation_bound(problem, 0, deterministic_s=5.0)
        assert relaxed.optimal
        assert relaxed.bound == pytest.approx(_one_rank_optimum(problem), abs=1e-3)
        closed += 1
    assert closed >= 5


def test_beats_the_closed_forms_where_memory_binds() -> None:
    # Room for one microbatch's activations on each rank: the microbatches pass one at a
    # time, which the closed forms of `solver.bounds` do not see.
    gains = []
    for seed in range(6):
        problem = _v_case(2, 4, seed, tight=True)
        bound = max(v_rank_relaxation_bound(problem, r, deterministic_s=2.0).bound
                    for r in range(2))
        _, _, cost = heuristic_orders(problem)
        assert bound <= cost + 1e-9
        gains.append(bound - lower_bound(problem))
    assert max(gains) > 1.0


@pytest.mark.parametrize("seed", range(12))
def test_never_above_the_heuristic(seed: int) -> None:
    rng = random.Random(seed)
    problem = _v_case(rng.choice([2, 3, 4]), rng.choice([2, 3, 4, 6]), seed)
    _, _, cost = heuristic_orders(problem)
    for rank in range(problem.num_ranks):
        assert v_rank_relaxation_bound(problem, rank, deterministic_s=2.0).bound \
            <= cost + 1e-9


def test_ilp_prints_the_relaxation_where_the_v_cut_wins() -> None:
    # gpt1.5b-p8-m24 at a quarter of its 1p limit: the default solve takes the V cut, and
    # `--method ilp` joins the V relaxation's bound (1931.1 in the benchmark) to the
    # closed forms (1101.6), never above the cost.
    data = json.loads((PROFILES / "gpt1.5b-p8-m24.json").read_text())
    profile = parse_profile({**data, "memory_limit": 2})
    schedule = solve(profile, "ilp", exact=ExactOptions(time_limit_s=4, workers=1))
    assert schedule.profile.num_chunks == 2 and schedule.metrics is not None
    assert schedule.solver is not None
    general = lower_bound(schedule.profile.problem)
    relaxed = v_memory_relaxation_bound(schedule.profile.problem, time_limit_s=60,
                                        deterministic_s=2.0)
    assert general < relaxed <= schedule.metrics.cost + 1e-9
    assert general <= schedule.metrics.lower_bound <= schedule.metrics.cost + 1e-9
