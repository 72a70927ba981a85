"""The sweep axes of activation policies (DESIGN.md 6.3): `offload_ratio` sizes the copies
of every row's profile, `recompute_stages` runs named schedules with their first K stages
recomputed; both refuse what they cannot do, naming the line."""

from __future__ import annotations

import pytest
from ppsched.api.sweep.expand import expand_grid
from ppsched.api.sweep.grid import GridError, load_grid
from ppsched.api.sweep.task import run_task
from ppsched.solver.model.profile import parse_profile

from tests.api.sweep.conftest import WriteGrid


def test_offload_ratio_sizes_the_copies_after_the_cut(write_grid: WriteGrid) -> None:
    tasks = expand_grid(load_grid(write_grid("""
        profiles: [{UNIFORM}]
        methods: [pipeoffload-full]
        axes:
          v: [2]
          placement: [loop]
          offload_ratio: [0.25, 1.25]
    """)))
    assert [t.config["offload_ratio"] for t in tasks] == [0.25, 1.25]
    for task in tasks:
        problem = parse_profile(task.profile).problem
        k = task.config["offload_ratio"]
        assert problem.num_chunks == 2 and problem.can_offload
        assert problem.t_offload == pytest.approx(
            tuple(k * (f + b) for f, b in zip(problem.t_f, problem.t_b, strict=True)))


def test_host_bandwidth_sizes_each_copy_and_gpus_per_node_shares_the_link(
        write_grid: WriteGrid) -> None:
    tasks = expand_grid(load_grid(write_grid("""
        profiles: [{UNIFORM}]
        methods: [heuristic]
        axes:
          host_bandwidth: [10, 40]
          gpus_per_node: [1, 2]
    """)))
    assert [(t.config["host_bandwidth"], t.config["gpus_per_node"]) for t in tasks] == [
        (10.0, 1), (10.0, 2), (40.0, 1), (40.0, 2)]
    for task in tasks:
        problem = parse_profile(task.profile).problem
        gb = task.config["host_bandwidth"]
        # m_b GiB over gb GB/s, in ms.
        assert problem.t_offload == pytest.approx(
            tuple(m * 2**30 / (gb * 1e9) * 1e3 for m in problem.m_b))
        node = task.config["gpus_per_node"]
        assert len(problem.shared_host_link) == (0 if node == 1
                                                 else problem.num_ranks // node)


@pytest.mark.parametrize(("axes", "words"), [
    ("host_bandwidth: [0]", "axis 'host_bandwidth': 0 is not a bandwidth > 0"),
    ("gpus_per_node: [1.5]", "axis 'gpus_per_node': 1.5 is not an integer >= 1"),
])
def test_bad_host_axes_are_named(write_grid: WriteGrid, axes: str, words: str) -> None:
    with pytest.raises(GridError, match=words):
        load_grid(write_grid(f"""
            profiles: [{{UNIFORM}}]
            methods: [heuristic]
            axes:
              {axes}
        """))


def test_recompute_stages_names_the_method_and_offers_recompute(
        write_grid: WriteGrid) -> None:
    tasks = expand_grid(load_grid(write_grid("""
        profiles: [{UNIFORM}]
        methods: [1f1b, zb-h1]
        axes:
          recompute_stages: [0, 2, 4]
    """)))
    assert [(t.config["recompute_stages"], t.method) for t in tasks] == [
        (0, "1f1b"), (0, "zb-h1"), (2, "1f1b+recompute:2"), (2, "zb-h1+recompute:2"),
        (4, "1f1b+recompute:4"), (4, "zb-h1+recompute:4")]
    assert "m_ckpt" not in tasks[0].profile  # K = 0 is the plain row
    assert all(t.profile["m_ckpt"] == 0.0 for t in tasks[2:])
    rows = [run_task(t) for t in tasks]
    assert all(row["status"] == "heuristic" for row in rows), rows
    costs = [row["cost"] for row in rows]
    peaks = [row["peak_memory"] for row in rows]
    assert costs[0] < costs[2] < costs[4] and peaks[0] > peaks[2] > peaks[4]


def test_a_bad_recompute_count_is_refused_with_its_line(write_grid: WriteGrid) -> None:
    with pytest.raises(GridError, match=r"line 4: axis 'recompute_stages': -1 is not an "
                       r"integer >= 0"):
        load_grid(write_grid("profiles: [{UNIFORM}]\nmethods: [1f1b]\naxes:\n"
                             "  recompute_stages: [-1]\n"))
    with pytest.raises(GridError, match=r"line 4: axis 'recompute_stages': 5 is over the 4 "
                       r"stages"):
        expand_grid(load_grid(write_grid("profiles: [{UNIFORM}]\nmethods: [1f1b]\naxes:\n"
                                         "  recompute_stages: [5]\n")))
    with pytest.raises(GridError, match=r"line 4: .*not 'heuristic'.*add a filter"):
        expand_grid(load_grid(write_grid("profiles: [{UNIFORM}]\nmethods: [heuristic]\n"
                                         "axes:\n  recompute_stages: [1]\n")))
    # The filter the message names lets the grid through.
    tasks = expand_grid(load_grid(write_grid(
        "profiles: [{UNIFORM}]\nmethods: [heuristic, 1f1b]\naxes:\n"
        "  recompute_stages: [0, 1]\n"
        "filters: ['recompute_stages == 0 or method != \"heuristic\"']\n")))
    assert [t.method for t in tasks] == ["heuristic", "1f1b", "1f1b+recompute:1"]


def test_a_bad_offload_ratio_is_refused_with_its_line(write_grid: WriteGrid) -> None:
    with pytest.raises(GridError, match=r"line 4: axis 'offload_ratio': -0.5 is not a "
                       r"number >= 0"):
        load_grid(write_grid("profiles: [{UNIFORM}]\nmethods: [1f1b]\naxes:\n"
                             "  offload_ratio: [-0.5]\n"))
