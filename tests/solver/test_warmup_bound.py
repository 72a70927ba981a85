"""The warm-up bound of multi-chunk layouts (`bounds.warmup_bound`): never above any
valid schedule's span of the rank (exhaustive search on tiny V and loop pipelines), and
the hand arithmetic on the paper's 1.5B profile cut in a V."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest
from ppsched.solver.model.bounds import lower_bound, warmup_bound
from ppsched.solver.model.ops import Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import simulate
from ppsched.solver.solving.layouts import with_chunks

from tests.solver.test_v_relaxation import _extensions

PROFILES = Path(__file__).resolve().parents[2] / "profiles"
# More combinations of rank orders than this are left out (seconds each on one core).
MAX_COMBINATIONS = 60_000


def _rank_orders(problem: Problem, rank: int) -> list[list[Op]]:
    """Every order of the rank's ops that can run: per microbatch F on the rank's lower
    stage before F on its higher one, B on the higher before B on the lower, each B after
    its F and each W after its B (any other order deadlocks), within the memory limit."""
    stages = problem.rank_to_stages[rank]
    lo, hi = min(stages), max(stages)
    before: dict[Op, list[Op]] = {}
    for s in stages:
        for j in range(problem.num_microbatches):
            before[Op("F", s, j)] = [] if s == lo else [Op("F", lo, j)]
            before[Op("B", s, j)] = [Op("F", s, j), *([] if s == hi else [Op("B", hi, j)])]
            before[Op("W", s, j)] = [Op("B", s, j)]
    # The orders the dependencies allow within the limit: the enumeration of the V
    # relaxation's exhaustive tests (as `test_cpsat_shared` uses it).
    return list(_extensions(list(before), before, problem, rank))


def _least_spans(problem: Problem) -> list[float] | None:
    """Each rank's least span over every valid schedule; None when there are too many
    schedules to try."""
    per_rank = [_rank_orders(problem, r) for r in range(problem.num_ranks)]
    if len(per_rank[0]) * len(per_rank[1]) > MAX_COMBINATIONS:
        return None
    least = [float("inf")] * problem.num_ranks
    for combo in itertools.product(*per_rank):
        sim = simulate(problem, list(combo))
        if not sim.ok:
            continue  # a deadlock across ranks
        assert sim.metrics is not None
        least = [min(x, span) for x, span in zip(least, sim.metrics.span, strict=True)]
    assert all(x < float("inf") for x in least), "no valid schedule: the check is vacuous"
    return least


def _tiny(seed: int) -> dict[str, Any]:
    """Two ranks, two chunks each (V or loop), two microbatches, small integer times,
    latency 0 to 3, and each rank's limit its stages' m_b together: the least that runs,
    where memory caps the warm-up hardest."""
    rng = random.Random(seed)
    placement = rng.choice(["v", "loop"])
    m_b = [rng.choice([1.0, 2.0]) for _ in range(4)]
    stages = [[0, 3], [1, 2]] if placement == "v" else [[0, 2], [1, 3]]
    return {"num_ranks": 2, "num_microbatches": 2, "num_chunks": 2, "placement": placement,
            "t_f": [rng.randint(1, 3) for _ in range(4)],
            "t_b": [rng.randint(1, 3) for _ in range(4)],
            "t_w": [rng.randint(0, 2) for _ in range(4)],
            "t_comm": rng.choice([0.0, 1.0, 3.0]), "m_b": m_b,
            "m_w": [x * rng.choice([0.0, 0.5, 1.0]) for x in m_b],
            "memory_limit": [sum(m_b[s] for s in ranks) for ranks in stages]}


def test_never_above_a_valid_schedules_span() -> None:
    tried = raised = 0
    for seed in range(16):
        problem = parse_profile(_tiny(seed)).problem
        least = _least_spans(problem)
        if least is None:
            continue
        tried += 1
        for rank in range(problem.num_ranks):
            bound = warmup_bound(problem, rank)
            assert bound <= least[rank] + 1e-9, (seed, rank, bound, least)
            raised += bound > problem.busy_per_rank[rank] + 1e-9
        assert lower_bound(problem) <= max(least) + 1e-9
    # Floors: the search ran, and the bound said more than the op time where it did.
    assert tried >= 10
    assert raised >= tried


def test_the_v_cut_of_the_papers_1_5b_profile_by_hand() -> None:
    # Rank 0 runs stages 0 and 15 of the V cut: until its first B (on stage 15) it can run
    # only the 12 Fs that fit 6 units at m_b / 2 each, while microbatch j's forwards go
    # down all 16 stages (14 boundaries between ranks, none at the turn of the V).
    data = json.loads((PROFILES / "gpt1.5b-p8-m24.json").read_text())
    profile = parse_profile({**data, "memory_limit": 6})
    t_f, t_b, t_w, t_comm = (data[k] / (1 if k == "t_comm" else 2)
                             for k in ("t_f", "t_b", "t_w", "t_comm"))
    m, p = data["num_microbatches"], data["num_ranks"]
    problem = with_chunks(profile, 2, "v").problem
    busy = 2 * m * (t_f + t_b + t_w)
    trip = 2 * p * t_f + 2 * (p - 1) * t_comm
    fits = int(6 / (data["m_b"] / 2))
    assert warmup_bound(problem, 0) == pytest.approx(busy + trip - fits * t_f)
    assert lower_bound(problem) == pytest.approx(busy + trip - fits * t_f)
    # With memory for every F the warm-up costs nothing: the op time is the bound.
    roomy = with_chunks(parse_profile({**data, "memory_limit": 48}), 2, "v").problem
    assert lower_bound(roomy) == pytest.approx(busy)
