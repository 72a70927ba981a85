"""The advisor's assumptions (listed with their source, round-tripped through a config)
and its sensitivity line (every flip it reports is a flip when the advisor is rerun)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ppsched.solver.advisor.assumptions import (
    ASSUMED,
    CONFIG,
    DEFAULT,
    as_config_data,
    list_assumptions,
    set_field,
)
from ppsched.solver.advisor.rank import advise, parse_advisor_config, uses_recompute, winner
from ppsched.solver.advisor.sensitivity import (
    NONE_FITS,
    NOT_EXAMINED,
    format_sensitivity,
    probe_grid,
    probe_sensitivity,
    summary_line,
)

# Strategies without the ZB heuristic: each advisor run takes milliseconds.
BASE: dict[str, Any] = {
    "model": {"layers": 8, "hidden": 1024, "heads": 8, "seq_len": 2048,
              "microbatch_size": 2, "vocab": 32000},
    "cluster": {"num_gpus": 4, "gpus_per_node": 2, "gpu_tflops": 300.0, "mfu": 0.5,
                "gpu_memory_gb": 80.0, "intra_node_gbps": 200.0, "inter_node_gbps": 1.25},
    "num_microbatches": 8,
    "strategies": ["1f1b", "zb-v", "fsdp", "weipipe-interleave", "weipipe-naive"],
}


def _winner(data: dict[str, Any]) -> str:
    return winner(advise(parse_advisor_config(data))) or NONE_FITS


def test_every_assumption_is_listed_with_its_source() -> None:
    data = set_field(BASE, "fsdp_overlap", False)
    items = {a.field: a for a in list_assumptions(parse_advisor_config(data),
                                             frozenset({"cluster.mfu"}))}
    assert list(items) == list(ASSUMED)
    assert items["fsdp_overlap"].value is False and items["fsdp_overlap"].source == CONFIG
    assert items["alpha"].source == DEFAULT and items["alpha"].value == 0.5
    assert items["cluster.latency_us"].source == DEFAULT
    assert items["cluster.inter_node_gbps"].source == CONFIG
    assert items["cluster.mfu"].source == "--set"
    assert items["model.ffn_hidden"].value == (8 * 1024) // 3  # the derived default
    assert items["recompute"].value == []
    assert all(a.description for a in items.values())


def test_assumptions_round_trip_through_a_config() -> None:
    data = copy.deepcopy(BASE)
    data.update(recompute=["1f1b", "fsdp"], alpha=0.25, act_bytes_per_token_hidden=20.0)
    data["cluster"]["latency_us"] = 3.0
    config = parse_advisor_config(data)
    items = list_assumptions(config)
    pinned = parse_advisor_config(as_config_data(config, items))
    again = list_assumptions(pinned)
    assert [(a.field, a.value) for a in again] == [(a.field, a.value) for a in items]
    assert all(a.source == CONFIG for a in again)  # every value now written out
    assert [c.to_dict() for c in advise(pinned)] == [c.to_dict() for c in advise(config)]


def _check_flips(data: dict[str, Any], report: Any) -> int:
    """Every flip the report states, replayed with the full advisor; returns how many."""
    base = _winner(data)
    assert report.winner == base
    checked = 0
    config = parse_advisor_config(data)
    on = {s for s in data["strategies"] if uses_recompute(config, s)}
    for item in report.items:
        for side in item.sides:
            field, end, at, held = item.field, side.end, side.flip_at, side.held_until
            if field.startswith("recompute["):  # flipped for one strategy
                toggled = sorted(on ^ {field[len("recompute["):-1]})
                field, end, at, held = "recompute", toggled, toggled, sorted(on)
            assert _winner(set_field(data, field, end)) == side.winner
            if side.flip_at is None:
                continue
            assert side.flip_to != base
            assert _winner(set_field(data, field, at)) == side.flip_to
            assert _winner(set_field(data, field, held)) == base
            checked += 1
    return checked


def test_each_flip_found_is_a_flip_when_rerun() -> None:
    report = probe_sensitivity(BASE, advise(parse_advisor_config(BASE)), max_runs=200)
    assert report.complete
    flips = {i.field for i in report.items if i.flips}
    assert {"num_microbatches", "cluster.inter_node_gbps", "recompute[zb-v]"} <= flips
    assert _check_flips(BASE, report) == sum(
        1 for i in report.items for s in i.sides if s.flip_at is not None)
    line = summary_line(report)
    assert line.startswith("sensitivity: the pick zb-v flips with num_microbatches")


def test_the_bisection_brackets_the_flip_on_the_grid() -> None:
    report = probe_sensitivity(BASE, advise(parse_advisor_config(BASE)), max_runs=200)
    config = parse_advisor_config(BASE)
    for item in report.items:
        grid = probe_grid(config, item.field)
        for side in item.sides:
            if side.flip_at is not None and grid is not None:
                # adjacent on the grid: no checked value lies between held and flipped
                assert abs(grid.index(side.flip_at) - grid.index(side.held_until)) == 1


def test_memory_flips_are_found_without_rerunning_the_strategies() -> None:
    # zb-v (the fastest) needs 2.6 GB here, 1f1b 2.1 GB: with 2.4 GB 1f1b wins, and
    # moving the memory up to 4.8 GB hands the pick back to zb-v.
    data = set_field(BASE, "cluster.gpu_memory_gb", 2.4)
    ranked = advise(parse_advisor_config(data))
    assert winner(ranked) == "1f1b"
    report = probe_sensitivity(data, ranked, max_runs=200)
    memory = next(i for i in report.items if i.field == "cluster.gpu_memory_gb")
    up = next(s for s in memory.sides if s.end > 2.4)
    assert up.flip_to == "zb-v"
    zbv = next(c for c in ranked if c.strategy == "zb-v")
    assert up.held_until < zbv.peak_memory_gb <= up.flip_at  # type: ignore[operator]
    down = next(s for s in memory.sides if s.end < 2.4)
    assert down.winner == NONE_FITS  # 1.2 GB: nothing fits
    _check_flips(data, report)
    # no strategy is rerun for it: the memory is probed even with no reruns left
    free = probe_sensitivity(data, ranked, max_runs=0)
    again = next(i for i in free.items if i.field == "cluster.gpu_memory_gb")
    assert free.runs == 0 and again.sides == memory.sides


def test_the_cap_is_kept_and_said() -> None:
    report = probe_sensitivity(BASE, advise(parse_advisor_config(BASE)), max_runs=5)
    assert report.runs <= 5 and not report.complete
    assert any(i.note == NOT_EXAMINED for i in report.items)
    assert "some assumptions not examined" in summary_line(report)
    lines = format_sensitivity(report)
    assert any(NOT_EXAMINED in line for line in lines)


def test_grids_hold_the_current_value_and_accepted_values() -> None:
    config = parse_advisor_config(BASE)
    n = probe_grid(config, "num_microbatches")
    assert n == [4, 8, 12, 16, 20, 24, 28, 32]  # multiples of the 4 GPUs, N/4 .. 4N
    mfu = probe_grid(config, "cluster.mfu")
    assert mfu is not None and mfu[0] == 0.2 and mfu[-1] == 0.8 and 0.5 in mfu
    assert probe_grid(config, "cluster.gpu_tflops") is None
    odd = parse_advisor_config(set_field(BASE, "num_microbatches", 6))
    assert probe_grid(odd, "num_microbatches") == list(range(1, 25))


@pytest.mark.parametrize("field", ["fsdp_overlap", "cluster.host_link_gbps"])
def test_probes_of_one_strategy_or_none(field: str) -> None:
    report = probe_sensitivity(BASE, advise(parse_advisor_config(BASE)), max_runs=200)
    item = next(i for i in report.items if i.field == field)
    if field == "fsdp_overlap":
        assert item.sides and item.sides[0].end is False
    else:
        assert not item.sides and "moves no strategy" in item.note


def test_ceilings_cut_a_range() -> None:
    report = probe_sensitivity(BASE, advise(parse_advisor_config(BASE)), max_runs=200,
                               ceilings={"num_microbatches": 16})
    item = next(i for i in report.items if i.field == "num_microbatches")
    assert item.range == (4, 16) and max(s.end for s in item.sides) == 16
