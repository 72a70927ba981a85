"""The window search (solver/exact/lns.py) and the layouts `solve` considers by default below
1F1B's memory."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from ppsched.solver.exact.frame import hint_timing, scale, split_fused
from ppsched.solver.exact.lns import _Current, reorder_window, solve_lns
from ppsched.solver.heuristic.search import zb_heuristic
from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import simulate
from ppsched.solver.solving import ExactOptions, solve

from tests.solver.pins import PINNED_2026_11_27_FIFO_OPTIMUM_LIMIT_6

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def _profile(name: str, limit: float | None):  # type: ignore[no-untyped-def]
    data = json.loads((PROFILES / f"{name}.json").read_text())
    return parse_profile({**data, "memory_limit": limit})


@pytest.mark.parametrize("limit", [5.0, 6.0, 12.0])
def test_every_spliced_window_is_a_valid_schedule(limit: float) -> None:
    # The splice argument of the module docstring, checked: whatever CP-SAT does inside
    # a window, the whole order validates (dependencies, no deadlock, memory).
    problem = _profile("gpt1.5b-p8-m24", limit).problem
    scaled = scale(problem)
    orders = split_fused(zb_heuristic(problem).orders)
    sim = simulate(problem, orders)
    assert sim.metrics is not None
    current = _Current(orders, sim.metrics.cost, hint_timing(problem, scaled, orders)[0])
    horizon = max(current.start.values())
    rng = random.Random(7)
    spliced = 0
    for _ in range(6):
        t0 = rng.randrange(horizon)
        candidate = reorder_window(problem, scaled, current, t0, t0 + horizon // 6, 1.0, 1, 1)
        if candidate is None:
            continue
        spliced += 1
        check = simulate(problem, candidate)
        assert check.ok, check.violations[:3]
        assert sorted(str(op) for ops in candidate for op in ops) == \
            sorted(str(op) for ops in orders for op in ops)
    assert spliced > 0


def test_lns_never_worse_than_its_seed_and_reports_only_improvements() -> None:
    problem = _profile("gpt1.5b-p8-m24", 6.0).problem
    seed = zb_heuristic(problem)
    points: list[tuple[float, float, float]] = []
    result = solve_lns(problem, seed.orders, time_limit_s=4, workers=1,
                       on_progress=points.append)
    assert result.orders is not None and result.objective is not None
    sim = simulate(problem, result.orders)
    assert sim.ok and sim.metrics is not None
    assert result.objective == pytest.approx(sim.metrics.cost)
    assert result.objective <= seed.cost + 1e-9
    values = [p[1] for p in points]
    assert values == sorted(values, reverse=True) and len(set(values)) == len(values)
    assert result.status in ("feasible", "heuristic")  # a window proves nothing
    assert result.bound <= result.objective
    assert all(p[2] == pytest.approx(lower_bound(problem)) for p in points)


def test_solve_routes_to_lns_when_asked() -> None:
    profile = _profile("gpt1.5b-p8-m24", 7.0)
    schedule = solve(profile, "ilp", exact=ExactOptions(time_limit_s=2, workers=1, lns=True),
                     layouts=((1, None),))
    assert schedule.solver is not None and schedule.metrics is not None
    assert schedule.solver.backend == "lns"  # type: ignore[attr-defined]
    assert schedule.metrics.lower_bound <= schedule.metrics.cost


def test_default_solve_tries_the_v_layout_where_memory_binds() -> None:
    # Issue 11: at limit 6 (0.75p) the single-chunk optimum is 1527.3; the V cut, which
    # holds half a stage's activations per chunk, does better, and is now a default
    # candidate. At 1p memory (limit 8) too since issue 27: the V cut's 1188.4 beats the
    # single-chunk optimum 1309.5 there, and the default considers every layout.
    tight = _profile("gpt1.5b-p8-m24", 6.0)
    assert tight.problem.below_one_f_one_b()
    schedule = solve(tight)
    assert schedule.profile.num_chunks == 2 and schedule.profile.placement == "v"
    assert schedule.metrics is not None
    assert schedule.metrics.cost < PINNED_2026_11_27_FIFO_OPTIMUM_LIMIT_6
    one_p = _profile("gpt1.5b-p8-m24", 8.0)
    assert not one_p.problem.below_one_f_one_b()
    at_one_p = solve(one_p)
    assert at_one_p.profile.placement == "v" and at_one_p.metrics is not None
    assert at_one_p.metrics.cost < 1309.5
    # Naming the layouts keeps the user's choice.
    assert solve(tight, layouts=((1, None),)).profile.num_chunks == 1


_ONE_WINDOW = """
import hashlib, json, sys
from pathlib import Path
from ppsched.solver.exact.frame import hint_timing, scale, split_fused
from ppsched.solver.heuristic.search import zb_heuristic
from ppsched.solver.exact.lns import _Current, reorder_window
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import simulate
data = json.loads(Path(sys.argv[1]).read_text())
problem = parse_profile({**data, "memory_limit": 6.0}).problem
scaled = scale(problem)
orders = split_fused(zb_heuristic(problem).orders)
cost = simulate(problem, orders).metrics.cost
current = _Current(orders, cost, hint_timing(problem, scaled, orders)[0])
end = max(current.start.values())
window = reorder_window(problem, scaled, current, end // 4, end // 2, 0.5, 1, 0,
                        deterministic=True)
print(hashlib.sha1(repr(window).encode()).hexdigest())
"""


def test_a_window_by_deterministic_time_repeats_across_processes() -> None:
    # Each process hashes strings with its own seed: a window model built by iterating a
    # set of ops differed from run to run (here seeds 1 and 2 gave other orders), and
    # so did CP-SAT's answer under the same deterministic time.
    root = Path(__file__).resolve().parents[2]
    runs = {subprocess.run(
        [sys.executable, "-c", _ONE_WINDOW, str(PROFILES / "gpt1.5b-p8-m24.json")],
        capture_output=True, text=True, check=True, cwd=root,
        env={**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(root)},
    ).stdout for seed in (1, 2, 3)}
    assert len(runs) == 1, runs
