"""Views of FB ops (grid, SVG, trace) and the torch CSV of a DualPipe-V schedule, which
torch 2.13 loads into ScheduleDualPipeV and runs through its comms simulation."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from ppsched.solver.generators import get_generator
from ppsched.solver.model.grid import order_grid, time_grid
from ppsched.solver.model.ops import FBOp
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.model.schedule import Schedule
from ppsched.solver.render.svg import render_svg
from ppsched.solver.render.torch_csv import render_torch_csv
from ppsched.solver.render.trace import render_trace
from ppsched.solver.sim.emit import schedule_from_orders

from tests.needs import import_torch

_SVG = "{http://www.w3.org/2000/svg}"


def _schedule(p: int = 2, m: int = 4, overlap: float = 0.8) -> Schedule:
    profile = parse_profile({"num_ranks": p, "num_microbatches": m, "num_chunks": 2,
                             "placement": "v", "t_f": 1.0, "t_b": 1.0, "t_w": 1.0,
                             "m_b": 1.0, "m_w": 1.0, "overlap": overlap})
    return schedule_from_orders(profile, get_generator("dualpipe-v")(profile.problem),
                                "dualpipe-v")


def _num_fb(schedule: Schedule) -> int:
    return sum(op.kind == "FB" for rank in schedule.ranks for op in rank)


def test_grids_show_both_parts() -> None:
    schedule = _schedule()
    orders = schedule.orders()
    assert "F3s0&BW1s3" in order_grid(orders)
    start = [[op.start for op in rank] for rank in schedule.ranks]
    end = [[op.end for op in rank] for rank in schedule.ranks]
    assert "F3s0&BW1s3" in time_grid(orders, start, end)


def test_svg_draws_one_box_per_fb_with_both_labels() -> None:
    schedule = _schedule()
    root = ET.fromstring(render_svg(schedule))
    boxes = [r for r in root.iter(f"{_SVG}rect") if r.get("data-kind") == "FB"]
    assert len(boxes) == _num_fb(schedule) == 6
    titles = [box.findtext(f"{_SVG}title") or "" for box in boxes]
    assert "rank 0: FB = F3 stage 0 & BW1 stage 3 [7.0, 9.4]" in titles
    labels = {t.text for t in root.iter(f"{_SVG}text")}
    assert "F3&BW1" in labels  # the box's own label names both parts
    assert "FB forward & backward (overlapped)" in labels  # the legend


def test_svg_narrow_fb_box_keeps_both_microbatches() -> None:
    root = ET.fromstring(render_svg(_schedule(4, 16)))
    labels = {t.text for t in root.iter(f"{_SVG}text")}
    assert any(label and "&" in label and not label.startswith("F") for label in labels)


def test_trace_events_name_both_parts() -> None:
    schedule = _schedule()
    events = [e for e in render_trace(schedule)["traceEvents"] if e.get("cat") == "FB"]
    assert len(events) == _num_fb(schedule)
    first = events[0]
    assert first["name"] == "F3s0&BW1s3"
    assert first["args"] == {"stage": 0, "microbatch": 3, "kind": "FB", "stage_b": 3,
                             "microbatch_b": 1}
    assert first["dur"] == pytest.approx(0.8 * 3 * 1000.0)  # overlap * (t_f + t_b + t_w), us


def test_torch_csv_writes_overlap_actions() -> None:
    rows = render_torch_csv(_schedule()).splitlines()
    assert rows[0].split(",")[7:9] == ["(0F3;3B1)OVERLAP_F_B", "(3F2;0B0)OVERLAP_F_B"]


def _torch_schedule(schedules: Any, p: int, m: int) -> Any:
    """A ScheduleDualPipeV holding only what `_load_csv` reads: it needs no stages or
    process group to load and lower a CSV (torch builds its own order in __init__)."""
    schedule = schedules.ScheduleDualPipeV.__new__(schedules.ScheduleDualPipeV)
    schedule.pipeline_order = {}
    schedule.pp_group_size, schedule._num_stages, schedule._n_microbatches = p, 2 * p, m
    schedule._stages, schedule._defer_pp_recv = [], False
    return schedule


def _simulate_comms(schedules: Any, schedule: Any) -> Any:
    """torch's `_simulate_comms_compute` of the lowered schedule.

    torch 2.13's simulator knows neither OVERLAP_F_B (it reads the container's stage -1)
    nor the FSDP actions its own lowering adds (UNSHARD, RESHARD, REDUCE_GRAD), so its
    `_simulate()` raises on every DualPipe-V schedule, torch's own included. So: each
    overlap is given as its two sub-actions in place (the lowering puts both parts' sends
    after the pair, so a wait is the same), and the FSDP actions, which wait for nothing
    on other ranks, are left out.
    """
    skip = {schedules.UNSHARD, schedules.RESHARD, schedules.REDUCE_GRAD}
    flat = {rank: [sub for action in actions for sub in (action.sub_actions or (action,))
                   if sub.computation_type not in skip]
            for rank, actions in schedule.pipeline_order_with_comms.items()}
    return schedules._simulate_comms_compute(
        flat, lambda s: schedule.stage_index_to_group_rank[s], schedule._num_stages)


@pytest.mark.parametrize(("p", "m"), [(2, 4), (3, 7), (4, 8), (4, 13)])
def test_torch_loads_the_csv_and_finds_no_deadlock(tmp_path: Path, p: int, m: int) -> None:
    schedules = import_torch("torch.distributed.pipelining.schedules")
    path = tmp_path / "dualpipe-v.csv"
    path.write_text(render_torch_csv(_schedule(p, m)))
    schedule = _torch_schedule(schedules, p, m)
    schedule._load_csv(str(path))  # parses, validates, infers the V map, adds comms
    assert schedule.stage_index_to_group_rank == {s: s if s < p else 2 * p - 1 - s
                                                  for s in range(2 * p)}
    overlaps = [a for actions in schedule.pipeline_order.values() for a in actions
                if a.computation_type == schedules.OVERLAP_F_B]
    assert len(overlaps) == _num_fb(_schedule(p, m))
    sends = sum(a.computation_type == schedules.SEND_F
                for actions in schedule.pipeline_order_with_comms.values() for a in actions)
    assert sends == m * (2 * p - 2)  # every forward boundary between ranks, per microbatch
    timeline = _simulate_comms(schedules, schedule)
    assert all(len(steps) > 0 for steps in timeline.values())


def test_torch_comms_simulation_catches_a_deadlock(tmp_path: Path) -> None:
    # The check can fail: rank 1 waiting for a gradient rank 0 sends only later does.
    schedules = import_torch("torch.distributed.pipelining.schedules")
    schedule = _schedule(2, 4)
    orders = schedule.orders()
    fb = next(i for i, op in enumerate(orders[0]) if isinstance(op, FBOp))
    orders[0] = orders[0][fb:] + orders[0][:fb]  # rank 0 starts with a backward
    path = tmp_path / "bad.csv"
    path.write_text(render_torch_csv(orders))
    loaded = _torch_schedule(schedules, 2, 4)
    with pytest.raises((ValueError, AssertionError, RuntimeError)):
        loaded._load_csv(str(path))
        _simulate_comms(schedules, loaded)
