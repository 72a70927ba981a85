"""The SVG Gantt chart of a timed schedule: one lane per rank, one rect per op.

Self-contained and deterministic (no scripts, fonts or timestamps): a header with the
headline figures, a legend, the lanes at real start/end times, and a rounded time axis.
A rank with copies (O, L; DESIGN.md 6.3) gets a thinner row per copy lane under its
compute lane; R runs on the compute lane.
"""

from __future__ import annotations

import math
import re
from xml.sax.saxutils import escape

from ppsched.solver.model.ops import KINDS, Kind, lane_of
from ppsched.solver.model.schedule import Schedule, ScheduledOp
from ppsched.solver.render.sizes import input_microbatch, microbatch_sizes, size_label

# Geometry, in px. The drawable width is fixed so charts of any cost compare at a glance.
_PLOT_WIDTH = 1200.0
_LEFT = 72.0  # room for "rank 31"
_RIGHT = 24.0
_HEADER = 52.0  # two header lines
_LEGEND = 28.0
_LANE = 24.0
_LANE_GAP = 6.0
_COPY_LANE = 14.0  # a copy lane's row under its rank (DESIGN.md 6.3)
_AXIS = 46.0  # ticks, their labels and the "time" label
_FONT = 12
_OP_FONT = 10
_CHAR_WIDTH = 6.2  # average width of a digit at _OP_FONT px, to decide whether a label fits
# A label too wide for its box at _OP_FONT is drawn smaller, down to _MIN_OP_FONT, with a
# thinner margin: on the 1.5B chart (1200 px for ~1190 ms) an F or B is ~18 px wide and
# "23" needs 18.4 px at 10 px, so every label from 10 up used to be dropped.
_SMALLER_FONTS = (9.0, 8.0, 7.0, 6.0)
_SMALL_MARGIN = 1.5

_KIND_TO_COLOUR: dict[Kind, str] = {
    "F": "#3b75af",  # blue
    "B": "#2a9d8f",  # teal
    "W": "#e69b2d",  # amber
    "BW": "#8263b5",  # purple
    "FB": "#c4504a",  # red: an F overlapped with a BW (DESIGN.md 6.4)
    "R": "#7fb3e0",  # light blue: a forward again (DESIGN.md 6.3)
    "O": "#6b6b6b",  # greys: copies to the host and back
    "L": "#a8a8a8",
}
_KIND_TO_NAME: dict[Kind, str] = {
    "F": "F forward",
    "B": "B backward (input)",
    "W": "W backward (weights)",
    "BW": "BW backward (fused)",
    "FB": "FB forward & backward (overlapped)",
    "R": "R recompute",
    "O": "O offload (to host)",
    "L": "L reload (from host)",
}
# The last chunk of a rank is this far from its kind's colour towards white.
_MAX_LIGHTEN = 0.55


def render_svg(schedule: Schedule) -> str:
    """Draw `schedule` as a self-contained SVG Gantt chart.

    Args:
        schedule: a timed schedule (every op has ``start`` and ``end``), e.g. from `solve`.

    Returns:
        The SVG document as a string (valid XML, one ``<rect class="op">`` per op, each
        with a ``<title>`` tooltip naming the rank, op, stage and times).

    Raises:
        ValueError: when an op has no start or end (re-time the orders with
            ``schedule_from_orders`` first).
    """
    schedule.require_times()
    profile = schedule.profile
    rank_to_stages = profile.problem.rank_to_stages
    num_chunks = profile.num_chunks
    ops = [op for rank in schedule.ranks for op in rank]
    origin = min((_start(op) for op in ops), default=0.0)
    finish = max((_end(op) for op in ops), default=origin)
    total = finish - origin if finish > origin else 1.0
    step = nice_step(total)
    sizes = microbatch_sizes(schedule)  # None: alike microbatches, plain labels

    def x_of(t: float) -> float:
        return _LEFT + (t - origin) / total * _PLOT_WIDTH

    top = _HEADER + _LEGEND
    copy_rows = _copy_rows(schedule)
    rank_top: list[float] = []
    lanes_bottom = top
    for rows in copy_rows:
        rank_top.append(lanes_bottom)
        lanes_bottom += _LANE + len(rows) * _COPY_LANE + _LANE_GAP
    width = _LEFT + _PLOT_WIDTH + _RIGHT
    height = lanes_bottom + _AXIS
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:g}" height="{height:g}" '
        f'viewBox="0 0 {width:g} {height:g}" font-family="DejaVu Sans, Helvetica, Arial, '
        f'sans-serif" font-size="{_FONT}">',
        f'<rect class="background" width="{width:g}" height="{height:g}" fill="#ffffff"/>',
    ]
    out += _header(schedule)
    kinds = [k for k in (*KINDS, "FB", "R", "O", "L") if any(op.kind == k for op in ops)]
    out += _legend(kinds, num_chunks)

    # Grid lines first, so that ops are drawn over them.
    first = math.ceil(origin / step - 1e-9)
    ticks = [step * i for i in range(first, first + int(total / step + 1e-9) + 2)
             if step * i <= origin + total + 1e-9 * step]
    for t in ticks:
        x = x_of(t)
        out.append(f'<line x1="{x:.2f}" y1="{top - 3:g}" x2="{x:.2f}" y2="{lanes_bottom:g}" '
                   'stroke="#e4e4e4" stroke-width="1"/>')

    # Lanes.
    for r, rank_ops in enumerate(schedule.ranks):
        y = rank_top[r]
        out.append(f'<text x="{_LEFT - 8:g}" y="{y + _LANE / 2 + 4:g}" text-anchor="end">'
                   f"rank {r}</text>")
        for row, lane in enumerate(copy_rows[r]):
            out.append(f'<text class="lane" x="{_LEFT - 8:g}" y="'
                       f'{y + _LANE + row * _COPY_LANE + _COPY_LANE / 2 + 3.5:g}" '
                       f'font-size="{_OP_FONT}" text-anchor="end" fill="#555555">'
                       f"{lane}</text>")
        stages = rank_to_stages[r] if r < len(rank_to_stages) else ()
        for op in rank_ops:
            y, height = _row_of(op, schedule, rank_top[r], copy_rows[r])
            start, end = _start(op), _end(op)
            x0, x1 = x_of(start), x_of(end)
            chunk = stages.index(op.stage) if op.stage in stages else 0
            fill = _shade(_KIND_TO_COLOUR[op.kind], chunk, num_chunks)
            tip = f"rank {r}: {op.kind}{op.microbatch} stage {op.stage} [{_t(start)}, {_t(end)}]"
            if op.kind in ("O", "L"):
                tip = f"rank {r} {_lane(op, schedule)} lane: {tip.split(': ', 1)[1]}"
            if op.kind == "FB":  # one box, both parts named
                tip = (f"rank {r}: FB = F{op.microbatch} stage {op.stage} & BW"
                       f"{op.microbatch_b} stage {op.stage_b} [{_t(start)}, {_t(end)}]")
            elif sizes is not None:
                tip += (f", size {size_label(sizes[op.microbatch])} the mean, input "
                        f"microbatch {input_microbatch(schedule, op.microbatch)}")
            out.append(f'<rect class="op" data-kind="{op.kind}" x="{x0:.2f}" y="{y:g}" '
                       f'width="{max(x1 - x0, 0.0):.2f}" height="{height:g}" fill="{fill}" '
                       f'stroke="#ffffff" stroke-width="0.5"><title>{_esc(tip)}</title></rect>')
            label = str(op.microbatch)
            if op.kind == "FB":
                label = _fb_label(op, x1 - x0)
            elif sizes is not None:
                sized = f"{label} ({size_label(sizes[op.microbatch])})"
                if x1 - x0 >= len(sized) * _CHAR_WIDTH + 6:
                    label = sized
            font = _label_font(label, x1 - x0)
            if font is not None:
                label = _esc(label)
                out.append(f'<text x="{(x0 + x1) / 2:.2f}" y="{y + height / 2 + 3.5:g}" '
                           f'font-size="{font:g}" text-anchor="middle" '
                           f'fill="{_text_colour(fill)}" pointer-events="none">{label}</text>')

    # Time axis.
    axis_y = lanes_bottom + 2
    out.append(f'<line x1="{_LEFT:g}" y1="{axis_y:g}" x2="{_LEFT + _PLOT_WIDTH:g}" '
               f'y2="{axis_y:g}" stroke="#333333" stroke-width="1"/>')
    decimals = max(0, -math.floor(math.log10(step)))
    for t in ticks:
        x = x_of(t)
        out.append(f'<line x1="{x:.2f}" y1="{axis_y:g}" x2="{x:.2f}" y2="{axis_y + 5:g}" '
                   'stroke="#333333" stroke-width="1"/>')
        out.append(f'<text class="tick" x="{x:.2f}" y="{axis_y + 18:g}" text-anchor="middle">'
                   f"{t:.{decimals}f}</text>")
    out.append(f'<text x="{_LEFT + _PLOT_WIDTH / 2:g}" y="{axis_y + 36:g}" '
               'text-anchor="middle" fill="#555555">time</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _copy_rows(schedule: Schedule) -> list[list[str]]:
    """For each rank, the copy lanes its O and L ops run on, in a fixed order."""
    return [[lane for lane in ("d2h", "h2d", "copy")
             if any(_lane(op, schedule) == lane for op in rank if op.kind in ("O", "L"))]
            for rank in schedule.ranks]


def _lane(op: ScheduledOp, schedule: Schedule) -> str:
    """An O/L's lane: as the JSON states it, else as its profile's copy_lanes gives."""
    return op.lane or lane_of(op.kind, schedule.profile.copy_lanes)


def _row_of(op: ScheduledOp, schedule: Schedule, top: float, copy_rows: list[str],
            ) -> tuple[float, float]:
    """The y and height of `op`'s box: the rank's compute lane, or its copy lane's row."""
    if op.kind not in ("O", "L"):
        return top, _LANE
    row = copy_rows.index(_lane(op, schedule))
    return top + _LANE + row * _COPY_LANE, _COPY_LANE - 1


def _label_font(label: str, room: float) -> float | None:
    """The font size `label` fits `room` px at: _OP_FONT with its margin, else the
    largest smaller size that fits with a thin one; None when none does."""
    if room >= len(label) * _CHAR_WIDTH + 6:
        return _OP_FONT
    for font in _SMALLER_FONTS:
        if room >= len(label) * _CHAR_WIDTH * font / _OP_FONT + _SMALL_MARGIN:
            return font
    return None


def _fb_label(op: ScheduledOp, room: float) -> str:
    """Both parts' labels: ``F3&BW2`` where it fits, else their microbatches ``3&2``."""
    full = op.op.cell()
    return full if room >= len(full) * _CHAR_WIDTH + 6 else f"{op.microbatch}&{op.microbatch_b}"


def nice_step(total: float, target: int = 10) -> float:
    """A tick step of 1, 2 or 5 x 10^k giving about `target` ticks over `total` (8-12)."""
    if total <= 0 or not math.isfinite(total):
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(total / target))
    candidates = [f * magnitude * scale for scale in (0.1, 1.0, 10.0) for f in (1, 2, 5)]
    # Ticks counted with the one at the origin; the closest count to `target` wins.
    return min(candidates, key=lambda s: (abs(int(total / s + 1e-9) + 1 - target), s))


def _header(schedule: Schedule) -> list[str]:
    profile = schedule.profile
    title = (f"{profile.label}: {schedule.method} (p = {profile.num_ranks}, "
             f"m = {profile.num_microbatches}, v = {profile.num_chunks}"
             + (f", placement {profile.placement}" if profile.num_chunks > 1 else "") + ")")
    figures = [f"method {schedule.method}"]
    metrics, solver = schedule.metrics, schedule.solver
    if metrics is not None:
        figures += [f"cost {metrics.cost:.6g}", f"bubble rate {metrics.bubble_rate:.1%}"]
        if metrics.peak_memory:
            figures.append(f"peak memory {max(metrics.peak_memory):.4g} (max over ranks)")
        figures.append(f"lower bound {metrics.lower_bound:.6g}")
    if solver is not None:
        figures += [f"gap {solver.gap:.1%}", f"status {solver.status}"]
    elif metrics is not None and metrics.cost > 0:
        figures.append(f"gap {(metrics.cost - metrics.lower_bound) / metrics.cost:.1%}")
    sizes = microbatch_sizes(schedule)
    if sizes is not None:
        figures.append(f"microbatch sizes {size_label(min(sizes))} to "
                       f"{size_label(max(sizes))} the mean (labels: microbatch (size))")
    return [
        f'<text class="title" x="{_LEFT:g}" y="20" font-size="14" font-weight="bold">'
        f"{_esc(title)}</text>",
        f'<text class="figures" x="{_LEFT:g}" y="40">{_esc(" · ".join(figures))}</text>',
    ]


def _legend(kinds: list[Kind], num_chunks: int) -> list[str]:
    out = ['<g class="legend">']
    x, y = _LEFT, _HEADER
    for kind in kinds:
        out.append(f'<rect x="{x:g}" y="{y:g}" width="14" height="14" '
                   f'fill="{_KIND_TO_COLOUR[kind]}"/>')
        name = _KIND_TO_NAME[kind]
        out.append(f'<text x="{x + 19:g}" y="{y + 11:g}">{_esc(name)}</text>')
        x += 19 + len(name) * 7 + 18
    if num_chunks > 1:
        # Shades say which chunk of its rank a stage is (0 = the rank's first stage).
        for chunk in range(num_chunks):
            out.append(f'<rect x="{x:g}" y="{y:g}" width="14" height="14" '
                       f'fill="{_shade("#707070", chunk, num_chunks)}"/>')
            out.append(f'<text x="{x + 19:g}" y="{y + 11:g}">chunk {chunk}</text>')
            x += 19 + 7 * 7 + 14
    out.append("</g>")
    return out


def _shade(colour: str, chunk: int, num_chunks: int) -> str:
    """`colour` mixed towards white, more for later chunks; chunk 0 keeps it."""
    if num_chunks <= 1 or chunk <= 0:
        return colour
    amount = _MAX_LIGHTEN * min(chunk, num_chunks - 1) / (num_chunks - 1)
    rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in rgb)


def _text_colour(fill: str) -> str:
    # Relative luminance (sRGB weights, no gamma: good enough to pick black or white).
    r, g, b = (int(fill[i:i + 2], 16) for i in (1, 3, 5))
    return "#111111" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#ffffff"


def _start(op: ScheduledOp) -> float:
    assert op.start is not None  # checked by Schedule.require_times
    return op.start


def _end(op: ScheduledOp) -> float:
    assert op.end is not None  # checked by Schedule.require_times
    return op.end


def _t(value: float) -> str:
    """A time for tooltips: at most 3 decimals, always one (``31.0``, ``12.5``)."""
    return str(round(value, 3))


# Characters XML 1.0 cannot hold at all, escaped or not (NUL, most C0 controls, lone
# surrogates, U+FFFE/U+FFFF): a profile name carrying one would make the SVG ill-formed.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _esc(text: str) -> str:
    """Text for an SVG attribute or element: escaped, and XML-illegal characters shown
    as U+FFFD (the replacement character)."""
    return escape(_NOT_XML.sub("\ufffd", text), {'"': "&quot;"})
