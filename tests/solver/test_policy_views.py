"""Views of a schedule with activation policies (DESIGN.md 6.3): copies drawn on lane rows
under their rank (SVG, text grid) and on threads of their own (trace), R on the compute
lane; the torch CSV drops R/O/L and says so."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from ppsched.solver.model.grid import time_grid
from ppsched.solver.model.ops import Op, ops_from_text
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.model.schedule import Schedule
from ppsched.solver.render.svg import render_svg
from ppsched.solver.render.torch_csv import dropped_note, parse_torch_csv, render_torch_csv
from ppsched.solver.render.trace import render_trace
from ppsched.solver.sim.emit import schedule_from_orders

_SVG = "{http://www.w3.org/2000/svg}"


def _schedule(copy_lanes: int = 2) -> Schedule:
    """Two ranks: rank 0 offloads microbatch 0 and recomputes microbatch 1; rank 1 keeps."""
    profile = parse_profile({"num_ranks": 2, "num_microbatches": 2, "t_f": 1.0,
                             "t_b": 1.0, "t_w": 1.0, "m_b": 1.0, "m_w": 0.5,
                             "t_offload": 0.5, "t_r": 1.0, "copy_lanes": copy_lanes})

    orders = [ops_from_text("F0 O0 F1 L0 B0 W0 R1 B1 W1", stage=0),
              ops_from_text("F0 B0 W0 F1 B1 W1", stage=1)]
    return schedule_from_orders(profile, orders, "by-hand")


def _boxes(svg: str) -> list[dict[str, Any]]:
    root = ET.fromstring(svg)
    return [{"kind": rect.get("data-kind"), "y": float(rect.get("y", 0)),
             "height": float(rect.get("height", 0)),
             "title": rect.findtext(f"{_SVG}title")}
            for rect in root.iter(f"{_SVG}rect") if rect.get("class") == "op"]


@pytest.mark.parametrize(("copy_lanes", "rows"), [(2, ["d2h", "h2d"]), (1, ["copy"])])
def test_svg_draws_copies_on_lane_rows_under_their_rank(copy_lanes: int,
                                                        rows: list[str]) -> None:
    svg = render_svg(_schedule(copy_lanes))
    boxes = _boxes(svg)
    compute_y = {b["y"] for b in boxes if b["kind"] in ("F", "R") and "rank 0" in b["title"]}
    assert len(compute_y) == 1  # R on rank 0's compute lane, with its F
    (rank0,) = compute_y
    rank1 = min(b["y"] for b in boxes if "rank 1" in b["title"])
    copy_y = sorted({b["y"] for b in boxes if b["kind"] in ("O", "L")})
    assert len(copy_y) == len(rows)
    # Every copy row lies under rank 0's compute lane and above rank 1's.
    assert all(rank0 < y < rank1 for y in copy_y)
    assert all(b["height"] < 24 for b in boxes if b["kind"] in ("O", "L"))
    lanes = [t.text for t in ET.fromstring(svg).iter(f"{_SVG}text") if t.get("class") == "lane"]
    assert lanes == rows
    legend = "".join(t.text or "" for t in ET.fromstring(svg).iter(f"{_SVG}text"))
    assert "O offload" in legend and "L reload" in legend and "R recompute" in legend
    titles = [b["title"] for b in boxes if b["kind"] == "O"]
    assert titles == [f"rank 0 {rows[0]} lane: O0 stage 0 [1.0, 1.5]"]


def test_svg_of_a_keep_schedule_has_no_copy_rows() -> None:
    profile = parse_profile({"num_ranks": 2, "num_microbatches": 2, "t_f": 1.0,
                             "t_b": 1.0, "t_w": 1.0, "m_b": 1.0, "m_w": 0.5})
    orders = [[Op(k, 0, j) for k, j in (("F", 0), ("F", 1), ("B", 0), ("W", 0), ("B", 1),
                                         ("W", 1))],
              [Op(k, 1, j) for k, j in (("F", 0), ("B", 0), ("W", 0), ("F", 1), ("B", 1),
                                         ("W", 1))]]
    svg = render_svg(schedule_from_orders(profile, orders, "x"))
    assert 'class="lane"' not in svg
    assert {b["y"] for b in _boxes(svg)} == {80.0, 110.0}  # header + legend, lane + gap


def test_time_grid_has_a_row_per_copy_lane() -> None:
    schedule = _schedule()
    starts = [[op.start for op in rank] for rank in schedule.ranks]
    ends = [[op.end for op in rank] for rank in schedule.ranks]
    lines = time_grid(schedule.orders(), starts, ends).splitlines()[1:]
    names = [line.split("|")[0].strip() for line in lines]
    assert names == ["rank 0", "d2h", "h2d", "rank 1"]
    assert "O0" in lines[1] and "L0" in lines[2] and "R1" in lines[0]
    assert "O0" not in lines[0] and "L0" not in lines[0]
    one_lane = time_grid(schedule.orders(), starts, ends, copy_lanes=1).splitlines()[1:]
    assert [line.split("|")[0].strip() for line in one_lane] == ["rank 0", "copy", "rank 1"]


def test_trace_puts_copies_on_threads_of_their_own() -> None:
    schedule = _schedule()
    events = render_trace(schedule)["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert names == {0: "rank 0", 1: "rank 1", 2: "rank 0 d2h", 3: "rank 0 h2d"}
    order = {e["tid"]: e["args"]["sort_index"] for e in events
             if e["name"] == "thread_sort_index"}
    assert sorted(order, key=order.__getitem__) == [0, 2, 3, 1]  # lanes under rank 0
    tid_of = {e["name"]: e["tid"] for e in events if e["ph"] == "X" and e["pid"] == 0
              and e["args"]["stage"] == 0}
    assert (tid_of["O0"], tid_of["L0"], tid_of["R1"], tid_of["F0"]) == (2, 3, 0, 0)


def test_torch_csv_drops_policy_ops_and_says_so() -> None:
    schedule = _schedule()
    text = render_torch_csv(schedule)
    assert not re.search(r"\d[ROL]\d", text)
    kept = [[op for op in ops if op.kind not in ("R", "O", "L")]
            for ops in schedule.orders()]
    assert parse_torch_csv(text) == kept
    note = dropped_note(schedule)
    assert note is not None and "1 R, 1 O, 1 L" in note
    assert dropped_note(kept) is None
