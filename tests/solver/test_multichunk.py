"""The exact refinement on V and loop layouts (`solver.exact.multichunk`), and the issue 27
figures on gpt1.5b-p8-m24 cut in V, under CP-SAT's deterministic time (one worker, seed
0) so they repeat on a loaded machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ppsched.solver.exact.multichunk import applies, solve_multichunk
from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import simulate
from ppsched.solver.solving.pipeline import heuristic_orders

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def _cut(name: str, limit: float, chunks: int = 2, placement: str = "v") -> Problem:
    data = json.loads((PROFILES / f"{name}.json").read_text())
    one = parse_profile({**data, "memory_limit": limit})
    return with_chunks(one, chunks, placement).problem


@pytest.mark.parametrize(("chunks", "placement"), [(2, "v"), (2, "loop")])
def test_never_worse_than_the_hint_and_repeats(chunks: int, placement: str) -> None:
    problem = _cut("uniform-p4-m8", 3.0, chunks, placement)
    assert applies(problem)
    hint, _, cost = heuristic_orders(problem)
    runs = [solve_multichunk(problem, hint, workers=1, seed=0, deterministic_s=2.0)
            for _ in range(2)]
    first = runs[0]
    assert first.objective is not None and first.objective <= cost + 1e-9
    assert first.orders is not None and simulate(problem, first.orders).ok
    assert first.bound <= first.objective + 1e-9
    assert (runs[1].objective, runs[1].bound) == (first.objective, first.bound)


@pytest.mark.slow
@pytest.mark.parametrize(("limit", "cost_at_most", "bound_at_least"),
                         # The bound the probes proved with this budget (over FIFO V
                         # orders); before, the V bound stayed at the work per rank 1101.6.
                         # Limit 6 is left out: its search phases ran past 20 minutes of
                         # CPU on this 2-core machine (its probes alone prove 1180.8).
                         [(4.0, 1564.45, 1278.7)])
def test_gpt15b_v_under_a_deterministic_budget(limit: float, cost_at_most: float,
                                               bound_at_least: float) -> None:
    """Issue 27 asks, at limit 6, for a cost <= 1343.1 with a gap <= 2% over V and
    one-chunk schedules, and at limit 4 a gap <= 5%. What this model reaches with 30
    deterministic seconds is asserted here: never above the heuristic (limit 4: 1564.45,
    measured, from 1587.0), and the probes'
    bound (measured: refuted caps 1180.80 at limit 6 and 1278.75 at limit 4); the gap
    targets need a stronger V bound than the whole model's probes give."""
    problem = _cut("gpt1.5b-p8-m24", limit)
    hint, _, cost = heuristic_orders(problem)
    result = solve_multichunk(problem, hint, workers=1, seed=0, deterministic_s=30.0)
    assert result.objective is not None and result.objective <= min(cost, cost_at_most)
    assert bound_at_least <= result.bound <= result.objective
