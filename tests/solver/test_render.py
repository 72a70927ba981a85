"""The SVG, Chrome trace and torch CSV views of solved schedules."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ppsched.solver.model.ops import Op
from ppsched.solver.model.profile import load_profile, parse_profile
from ppsched.solver.model.schedule import Schedule
from ppsched.solver.render.svg import nice_step, render_svg
from ppsched.solver.render.torch_csv import parse_torch_csv, render_torch_csv
from ppsched.solver.render.trace import render_trace
from ppsched.solver.sim.emit import schedule_from_orders
from ppsched.solver.solving.entry import solve

PROFILES = Path(__file__).resolve().parents[2] / "profiles"
CASES = [(name, method)
         for name in ("uniform-p4-m8", "hetero-p8-m32", "gpt1.5b-p8-m24")
         for method in ("zb-h1", "heuristic")]
SVG = "{http://www.w3.org/2000/svg}"


def _solved(name: str, method: str) -> Schedule:
    return solve(load_profile(PROFILES / f"{name}.json"), method)


def _chunked(placement: str) -> Schedule:
    """A valid two-chunk schedule: each rank runs all its Fs, then all its BWs."""
    profile = parse_profile({
        "name": 'two <chunks> & "quotes"', "num_ranks": 2, "num_microbatches": 4,
        "num_chunks": 2, "placement": placement, "t_f": 1.0, "t_b": 1.0, "t_w": 1.0,
        "m_b": 1.0, "m_w": 0.5})
    orders = [[Op("F", s, j) for s in stages for j in range(4)]
              + [Op("BW", s, j) for s in reversed(stages) for j in range(4)]
              for stages in profile.problem.rank_to_stages]
    return schedule_from_orders(profile, orders, "naive")


def _op_rects(root: ET.Element) -> list[ET.Element]:
    return [e for e in root.iter(f"{SVG}rect") if e.get("class") == "op"]


# SVG.


@pytest.mark.parametrize(("name", "method"), CASES)
def test_svg_draws_every_op(name: str, method: str) -> None:
    schedule = _solved(name, method)
    text = render_svg(schedule)
    root = ET.fromstring(text)  # valid XML
    rects = _op_rects(root)
    assert len(rects) == sum(len(rank) for rank in schedule.ranks)
    titles = [rect.find(f"{SVG}title") for rect in rects]
    assert all(t is not None and t.text and t.text.startswith("rank ") for t in titles)
    assert "F forward" in text and "B backward (input)" in text and "W backward" in text
    assert schedule.metrics is not None
    assert f"cost {schedule.metrics.cost:.6g}" in text
    assert f"bubble rate {schedule.metrics.bubble_rate:.1%}" in text
    labels = {e.text for e in root.iter(f"{SVG}text")}
    assert {f"rank {r}" for r in range(schedule.profile.num_ranks)} <= labels
    assert "time" in labels
    assert render_svg(schedule) == text  # deterministic


def test_svg_rects_at_real_times_with_tooltips() -> None:
    schedule = _solved("uniform-p4-m8", "zb-h1")
    rects = _op_rects(ET.fromstring(render_svg(schedule)))
    first = schedule.ranks[0][0]
    assert rects[0].get("x") == "72.00"
    title = rects[0].find(f"{SVG}title")
    assert title is not None
    assert title.text == f"rank 0: F0 stage 0 [{first.start}, {first.end}]"
    # Same duration, same width: the scale is linear.
    assert len({r.get("width") for r in rects}) == 1
    # Only the kinds present are in the legend (zb-h1 has no fused BW).
    assert "BW backward" not in render_svg(schedule)


def test_svg_shades_chunks_and_escapes_the_name() -> None:
    for placement in ("loop", "v"):
        schedule = _chunked(placement)
        text = render_svg(schedule)
        root = ET.fromstring(text)
        assert "two &lt;chunks&gt; &amp; &quot;quotes&quot;" in text
        fills = {(r.get("data-kind"), r.get("fill")) for r in _op_rects(root)}
        assert len(fills) == 4  # F and BW, each in two chunk shades
        assert "chunk 1" in text and "BW backward (fused)" in text


def test_svg_refuses_untimed_ops() -> None:
    schedule = _solved("uniform-p4-m8", "zb-h1")
    schedule.ranks[1][2].start = None
    with pytest.raises(ValueError, match="rank 1 op 2"):
        render_svg(schedule)


@pytest.mark.parametrize("total", [0.37, 1.0, 24.0, 33.0, 100.0, 1309.5, 3798.7, 1e6])
def test_nice_step_is_round_and_gives_about_ten_ticks(total: float) -> None:
    step = nice_step(total)
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert round(mantissa, 9) in (1.0, 2.0, 5.0)
    assert 6 <= int(total / step + 1e-9) + 1 <= 14


# Trace.


@pytest.mark.parametrize(("name", "method"), CASES)
def test_trace_has_one_event_per_op(name: str, method: str) -> None:
    schedule = _solved(name, method)
    trace = render_trace(schedule)
    json.dumps(trace)  # serialisable
    assert trace["displayTimeUnit"] == "ms"
    events = trace["traceEvents"]
    threads = [e for e in events if e["ph"] == "M" and e["name"] == "thread_name"]
    assert sorted(e["tid"] for e in threads) == list(range(schedule.profile.num_ranks))
    assert all(e["args"]["name"] == f"rank {e['tid']}" for e in threads)
    process = [e for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    assert process[0]["args"]["name"].startswith(schedule.profile.label)
    complete = [e for e in events if e["ph"] == "X"]
    expected = [(r, op) for r, rank in enumerate(schedule.ranks) for op in rank]
    assert len(complete) == len(expected)
    for event, (r, op) in zip(complete, expected, strict=True):
        assert op.start is not None and op.end is not None
        assert event["tid"] == r
        # A rank of several stages (the default solve may cut the model) names the stage.
        assert event["name"] == op.op.cell(with_stage=schedule.profile.num_chunks > 1)
        assert event["name"].startswith(f"{op.kind}{op.microbatch}")
        assert event["cat"] == op.kind
        assert event["ts"] == op.start * 1000
        assert event["dur"] == (op.end - op.start) * 1000
        assert event["args"] == {"stage": op.stage, "microbatch": op.microbatch,
                                 "kind": op.kind}


def test_trace_names_stages_when_ranks_run_several() -> None:
    events = render_trace(_chunked("loop"))["traceEvents"]
    assert {e["name"] for e in events if e["ph"] == "X"} >= {"F0s0", "F0s2", "BW3s3"}


# torch CSV.


@pytest.mark.parametrize(("name", "method"), CASES)
def test_torch_csv_round_trips(name: str, method: str) -> None:
    schedule = _solved(name, method)
    text = render_torch_csv(schedule)
    assert len(text.splitlines()) == schedule.profile.num_ranks
    assert parse_torch_csv(text) == schedule.orders()
    assert render_torch_csv(schedule.orders()) == text


def test_torch_csv_uses_torch_action_names() -> None:
    zb = render_torch_csv(_solved("uniform-p4-m8", "zb-h1"))
    first = zb.splitlines()[0].split(",")
    assert first[:4] == ["0F0", "0F1", "0F2", "0F3"]
    assert "0I0" in first and "0W0" in first  # our B is torch's I
    one_f_one_b = _solved("uniform-p4-m8", "1f1b")
    last = render_torch_csv(one_f_one_b).splitlines()[3].split(",")
    assert last[:3] == ["3F0", "3B0", "3F1"]  # our BW is torch's B
    assert parse_torch_csv(render_torch_csv(one_f_one_b)) == one_f_one_b.orders()


def test_torch_csv_reads_torch_extras() -> None:
    text = "0F0,,1SEND_F0,0UNSHARD,0I0,0W0\r\n1RECV_F0,1F0,(1B0;1F1)OVERLAP_F_B\r\n"
    assert parse_torch_csv(text) == [
        [Op("F", 0, 0), Op("B", 0, 0), Op("W", 0, 0)],
        [Op("F", 1, 0), Op("BW", 1, 0), Op("F", 1, 1)],
    ]


@pytest.mark.parametrize("cell", ["0X3", "F3", "0F", "0SEND_Q1", "hello"])
def test_torch_csv_names_a_bad_cell(cell: str) -> None:
    with pytest.raises(ValueError, match=r"line 2, cell 3: '.*' is not a pipeline action"):
        parse_torch_csv(f"0F0,0I0\n1F0,1I0,{cell}\n")


def _unequal_schedule() -> Schedule:
    # Input microbatch 0 costs 3 times each other one (2.4 times the mean of 8); the
    # heuristic may renumber the microbatches (microbatch_order).
    profile = parse_profile({"num_ranks": 4, "num_microbatches": 8, "t_f": 10.0,
                             "t_b": 10.0, "t_w": 5.0, "m_b": 1.0, "m_w": 0.5,
                             "microbatches": [{"scale": x} for x in (3, 1, 1, 1, 1, 1, 1, 1)]})
    return solve(profile)


def test_views_label_unequal_microbatches_by_their_size() -> None:
    schedule = _unequal_schedule()
    order = schedule.microbatch_order or list(range(8))
    big = order.index(0)
    svg = render_svg(schedule)
    root = ET.fromstring(svg)
    ns = {"s": "http://www.w3.org/2000/svg"}
    titles = [t.text or "" for t in root.iterfind(".//s:rect/s:title", ns)]
    stages = schedule.profile.num_ranks * schedule.profile.num_chunks  # the cut's, if any
    assert sum("size 2.4x the mean, input microbatch 0" in t for t in titles) == 3 * stages
    assert sum("size 0.8x the mean" in t for t in titles) == 3 * stages * 7
    labels = [t.text for t in root.iterfind(".//s:text", ns)]
    assert f"{big} (2.4x)" in labels
    assert "microbatch sizes 0.8x to 2.4x the mean" in svg
    events = [e for e in render_trace(schedule)["traceEvents"] if e["ph"] == "X"]
    for event in events:
        args = event["args"]
        assert args["input_microbatch"] == order[args["microbatch"]]
        assert args["microbatch_size"] == pytest.approx(2.4 if args["input_microbatch"] == 0
                                                        else 0.8)


def test_views_of_alike_microbatches_carry_no_sizes() -> None:
    schedule = solve(load_profile(PROFILES / "gpt1.5b-p8-m24.json"))
    assert "microbatch sizes" not in render_svg(schedule)
    events = [e for e in render_trace(schedule)["traceEvents"] if e["ph"] == "X"]
    assert all("microbatch_size" not in e["args"] for e in events)


@pytest.mark.parametrize("layouts", [((1, None),), ((2, "v"),)])
def test_two_digit_microbatch_labels_fit_on_the_1_5b_chart(
        layouts: tuple[tuple[int, str | None], ...]) -> None:
    """Every F and B box of the README's 1.5B chart (m = 24) is labelled, 10 to 23 too:
    a label too wide at the usual size is drawn smaller, never dropped, and never wider
    than its box."""
    profile = load_profile(PROFILES / "gpt1.5b-p8-m24.json")
    schedule = solve(profile.model_copy(update={"memory_limit": 16.0}), "heuristic",
                     layouts=layouts)
    root = ET.fromstring(render_svg(schedule))
    boxes = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "op"]
    labelled: dict[str, set[str]] = {"F": set(), "B": set(), "W": set()}
    for text in root.iter(f"{SVG}text"):
        if text.get("pointer-events") != "none":
            continue
        x, y = float(text.get("x", 0)), float(text.get("y", 0))
        font = float(text.get("font-size", 0))
        box = next(r for r in boxes
                   if float(r.get("x", 0)) <= x <= float(r.get("x", 0)) + float(r.get("width", 0))
                   and float(r.get("y", 0)) <= y <= float(r.get("y", 0))
                   + float(r.get("height", 0)))
        width = float(box.get("width", 0))
        # The digits' width at this size (6.2 px a digit at 10 px) fits in the box.
        assert len(text.text or "") * 0.62 * font < width, (text.text, font, width)
        assert font >= 6
        labelled[box.get("data-kind", "")].add(text.text or "")
    every = {str(j) for j in range(24)}
    assert labelled["F"] == every and labelled["B"] == every
