"""The `microbatch_spread` axis: unequal microbatches (DESIGN.md 6.2) in a sweep."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from ppsched.api.sweep.expand import expand_grid, spread_scales
from ppsched.api.sweep.grid import GridError, load_grid
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.solving.entry import solve

from tests.api.sweep.conftest import WriteGrid


@pytest.mark.parametrize("m", [4, 16, 33])
@pytest.mark.parametrize("sigma", [0.25, 1.0])
def test_spread_scales_have_mean_one_and_the_asked_spread(m: int, sigma: float) -> None:
    sizes = spread_scales(m, sigma)
    assert len(sizes) == m
    assert math.fsum(sizes) / m == pytest.approx(1.0)
    logs = [math.log(x) for x in sizes]
    mean = sum(logs) / m
    spread = math.sqrt(sum((x - mean) ** 2 for x in logs) / m)
    assert 0.6 * sigma < spread <= sigma  # quantiles: a little under sigma for small m
    assert sizes != sorted(sizes)  # a fixed shuffle, not a sorted order
    assert spread_scales(m, sigma) == sizes  # deterministic


def test_spread_axis_gives_unequal_microbatches_and_kp_counts_the_largest(
        write_grid: WriteGrid) -> None:
    grid = load_grid(write_grid("""
        profiles: {UNIFORM}
        methods: [heuristic]
        axes:
          microbatch_spread: [0, 0.5]
          memory_limit: [1p]
    """))
    tasks = expand_grid(grid)
    assert [t.config["microbatch_spread"] for t in tasks] == [0.0, 0.5]
    alike, spread = (parse_profile(t.profile) for t in tasks)
    assert alike.problem.uniform_microbatches
    assert not spread.problem.uniform_microbatches
    largest = max(max(row) for row in spread.problem.m_b_mb)
    assert spread.memory_limit == pytest.approx(spread.num_ranks * largest)
    assert alike.memory_limit == pytest.approx(alike.num_ranks * max(alike.problem.m_b))
    schedule = solve(spread)  # 1p with the largest microbatch fits
    assert schedule.metrics is not None


def test_spread_axis_refuses_bad_values_and_unequal_profiles(write_grid: WriteGrid,
                                                            tmp_path: Path) -> None:
    with pytest.raises(GridError, match="axis 'microbatch_spread': -1 is not a number >= 0"):
        load_grid(write_grid("""
            profiles: {UNIFORM}
            methods: [heuristic]
            axes:
              microbatch_spread: [-1]
        """))
    unequal = tmp_path / "unequal.json"
    unequal.write_text(json.dumps({"name": "unequal", "num_ranks": 2, "num_microbatches": 2,
                                   "t_f": 1, "t_b": 1, "t_w": 1, "m_b": 1, "m_w": 0.5,
                                   "microbatches": [{"scale": 2}, {}]}))
    grid = load_grid(write_grid(f"""
        profiles: {unequal}
        methods: [heuristic]
        axes:
          microbatch_spread: [0, 0.5]
    """))
    with pytest.raises(GridError, match=re.escape("line 4: axis 'microbatch_spread': "
                                                  "profile unequal.json already has "
                                                  "per-microbatch values")):
        expand_grid(grid)
