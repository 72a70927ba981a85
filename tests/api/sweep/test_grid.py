"""Grid files: expansion into tasks, the rules of each axis, and the resume key."""

from __future__ import annotations

import pytest
from ppsched.api.sweep.expand import expand_grid
from ppsched.api.sweep.grid import load_grid

from tests.api.sweep.conftest import WriteGrid


def test_product_of_profiles_axes_and_methods(write_grid: WriteGrid) -> None:
    grid = load_grid(write_grid("""
        profiles: [{UNIFORM}, {GPT}]
        methods: [1f1b, heuristic]
        axes:
          m: [8, 16, 32]
          t_comm: [0, 0.5]
    """))
    tasks = expand_grid(grid)
    assert len(tasks) == 2 * 2 * 3 * 2
    assert len({t.key for t in tasks}) == len(tasks)
    first = tasks[0]
    assert first.config["profile"] == "uniform-p4-m8"
    assert (first.config["m"], first.config["t_comm"], first.method) == (8, 0.0, "1f1b")
    assert first.profile["num_microbatches"] == 8
    assert {t.profile["t_comm"] for t in tasks} == {0.0, 0.5}


def test_filters_keep_only_matching_rows(write_grid: WriteGrid) -> None:
    grid = load_grid(write_grid("""
        profiles: {UNIFORM}
        methods: [1f1b, zb-h1, heuristic]
        axes:
          p: [2, 4, 8]
          m: [4, 8, 16]
        filters:
          - "m >= 2 * p"
          - "method != 'zb-h1' or p == 4"
    """))
    rows = {(t.config["p"], t.config["m"], t.method) for t in expand_grid(grid)}
    expected = {(p, m, method) for p in (2, 4, 8) for m in (4, 8, 16)
                for method in ("1f1b", "zb-h1", "heuristic")
                if m >= 2 * p and (method != "zb-h1" or p == 4)}
    assert rows == expected


def test_memory_multiple_follows_p_and_m_b(write_grid: WriteGrid) -> None:
    grid = load_grid(write_grid("""
        profiles: {GPT}
        methods: [heuristic]
        axes:
          p: [4, 16]
          scale.m_b: [1, 2]
          memory_limit: [1p, 1.5p, 20, none]
    """))
    limits = {(t.config["p"], t.config["scale_m_b"], t.config["memory"]):
              t.profile["memory_limit"] for t in expand_grid(grid)}
    # p * max(m_b) with the GPT profile's m_b = 1, scaled by scale.m_b.
    assert limits[(4, 1.0, "1p")] == pytest.approx(4)
    assert limits[(16, 1.0, "1.5p")] == pytest.approx(24)
    assert limits[(16, 2.0, "1p")] == pytest.approx(32)
    assert limits[(4, 2.0, "20")] == 20
    assert limits[(4, 1.0, "none")] is None


def test_per_stage_scaling_of_one_stage(write_grid: WriteGrid) -> None:
    grid = load_grid(write_grid("""
        profiles: {UNIFORM}
        methods: [heuristic]
        axes:
          scale.t_f[-1]: [1, 1.5]
          scale.t_w: [2]
    """))
    tasks = expand_grid(grid)
    assert [t.profile["t_f"] for t in tasks] == [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.5]]
    assert all(t.profile["t_w"] == 2.0 for t in tasks)
    assert tasks[1].config["scale_t_f_1"] == 1.5


def test_v_axis_recuts_the_model_and_v1_ignores_placement(write_grid: WriteGrid) -> None:
    grid = load_grid(write_grid("""
        profiles: {UNIFORM}
        methods: [heuristic]
        axes:
          v: [1, 2]
          placement: [loop, v]
          memory_limit: [2p]
    """))
    tasks = expand_grid(grid)
    shapes = [(t.config["v"], t.config["placement"]) for t in tasks]
    assert shapes == [(1, None), (2, "loop"), (2, "v")]
    recut = tasks[1].profile
    assert (recut["num_chunks"], recut["placement"], recut["t_f"]) == (2, "loop", 0.5)
    # The limit is 2 * p * m_b of the one-chunk model, the same absolute number at v = 2.
    assert {t.profile["memory_limit"] for t in tasks} == {8.0}


def test_p_of_a_per_stage_profile_may_stay(write_grid: WriteGrid) -> None:
    grid = load_grid(write_grid("""
        profiles: {HETERO}
        methods: [heuristic]
        axes:
          p: [8]
          m: [16, 32]
    """))
    assert len(expand_grid(grid)) == 2


def test_key_depends_on_what_changes_the_answer(write_grid: WriteGrid) -> None:
    path = write_grid("""
        profiles: {UNIFORM}
        methods: [heuristic, ilp]
        axes:
          memory_limit: [1p, 4]
    """)
    tasks = expand_grid(load_grid(path))
    # 1p of this profile is 4: the same resolved profile, so one row per method.
    assert [(t.config["memory"], t.method) for t in tasks] == [("1p", "heuristic"),
                                                               ("1p", "ilp")]
    again = expand_grid(load_grid(path))
    assert [t.key for t in again] == [t.key for t in tasks]
    longer = expand_grid(load_grid(path), time_limit_s=30)
    assert longer[0].key == tasks[0].key  # the heuristic has no time limit
    assert longer[1].key != tasks[1].key
    assert longer[1].options == {"time_limit_s": 30}
    # A work limit (reproducible): no wall limit unless one is given besides.
    budgeted = expand_grid(load_grid(path), work_limit=8)
    assert budgeted[1].options == {"work_limit": 8}
    assert budgeted[1].key not in (tasks[1].key, longer[1].key)
    both = expand_grid(load_grid(path), time_limit_s=30, work_limit=8)
    assert both[1].options == {"work_limit": 8, "time_limit_s": 30}
