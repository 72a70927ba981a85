"""Views of a timed WeiPipe schedule: a text grid of ring steps and an SVG with one lane
per rank, its ops at real times and, under each lane, the ring transfer to the next rank.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from ppsched.solver.render.svg import nice_step
from ppsched.solver.weipipe.simulator import WeiPipeResult

_COLOUR = {"F": "#3b75af", "B": "#2a9d8f", "W": "#e69b2d", "BW": "#8263b5"}
_LINK = "#9a9a9a"
_WIDTH, _LEFT, _TOP, _LANE, _LINK_H, _GAP = 1200.0, 72.0, 44.0, 22.0, 6.0, 10.0


def weipipe_grid(result: WeiPipeResult, max_steps: int = 24) -> str:
    """One row per rank, one column per ring step (ops joined by ``+``), with each rank's
    start time of the step; wider programs are cut with ``...``."""
    program = result.program
    cells = ["+".join(op.cell() for op in step) for step in program[:max_steps]]
    width = max((len(c) for c in cells), default=1) + 2
    lines = [f"{result.method}: step time {result.step_time:.6g}, bubble "
             f"{result.bubble_rate:.4f}, peak memory {max(result.peak_memory):.6g}",
             " " * 8 + "".join(f"{i:<{width}}" for i in range(len(cells)))]
    for r in range(result.profile.num_ranks):
        row = "".join(f"{c:<{width}}" for c in cells)
        times = "".join(f"{'@' + format(result.start[r][s], '.4g'):<{width}}"
                        for s in range(len(cells)))
        more = " ..." if len(program) > max_steps else ""
        lines.append(f"{'rank ' + str(r):<7} {row.rstrip()}{more}")
        lines.append(f"{'':<7} {times.rstrip()}")
    return "\n".join(lines)


def weipipe_svg(result: WeiPipeResult) -> str:
    """The SVG: per rank a lane of op boxes (F blue, B teal, W amber, BW purple) and a thin
    grey bar for each transfer to rank r+1 (the ring closes from the last rank to rank 0)."""
    p = result.profile.num_ranks
    total = max(result.makespan, 1e-12)
    scale = _WIDTH / total
    row = _LANE + _LINK_H + _GAP
    height = _TOP + p * row + 40
    width = _LEFT + _WIDTH + 24
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
           f'height="{height:.0f}" font-family="sans-serif" font-size="11">',
           f'<text x="8" y="18" font-size="13">{escape(result.method)} on '
           f'{escape(result.profile.label)}: step time {result.step_time:.6g}, bubble '
           f'{result.bubble_rate:.4f}</text>',
           '<text x="8" y="34">grey bars: weights and gradients sent to the next rank '
           'of the ring</text>']
    for i, (kind, colour) in enumerate(_COLOUR.items()):  # the legend
        left = 400 + 60 * i
        out.append(f'<rect class="legend" x="{left}" y="25" width="12" height="12" '
                   f'fill="{colour}"/><text x="{left + 16}" y="35">{kind}</text>')
    for r in range(p):
        y = _TOP + r * row
        out.append(f'<text x="8" y="{y + 15:.1f}">rank {r}</text>')
        for s, step in enumerate(result.program):
            t = result.start[r][s]
            for op in step:
                c = result.profile.chunks
                dur = (c["t_b"][op.chunk] + c["t_w"][op.chunk] if op.kind == "BW"
                       else c[f"t_{op.kind.lower()}"][op.chunk])
                x, w = _LEFT + t * scale, max(dur * scale, 0.5)
                out.append(f'<rect class="op" x="{x:.2f}" y="{y:.1f}" width="{w:.2f}" '
                           f'height="{_LANE}" fill="{_COLOUR[op.kind]}" stroke="white" '
                           f'stroke-width="0.5"><title>rank {r} step {s}: {op.cell()} '
                           f'{t:.6g}-{t + dur:.6g}</title></rect>')
                if w > 7 * len(op.cell()):
                    out.append(f'<text x="{x + 2:.2f}" y="{y + 15:.1f}" fill="white">'
                               f'{op.cell()}</text>')
                t += dur
            send = result.transfer[r][s]
            if send > 0:
                x = _LEFT + result.start[r][s] * scale
                out.append(f'<rect class="link" x="{x:.2f}" y="{y + _LANE + 1:.1f}" '
                           f'width="{max(send * scale, 0.5):.2f}" height="{_LINK_H - 2}" '
                           f'fill="{_LINK}"><title>rank {r} -&gt; rank {(r + 1) % p}, step '
                           f'{s}: {send:.6g}</title></rect>')
    tick = nice_step(total)
    axis_y = _TOP + p * row + 8
    k = 0
    while k * tick <= total + 1e-9:
        x = _LEFT + k * tick * scale
        out.append(f'<line x1="{x:.2f}" y1="{axis_y}" x2="{x:.2f}" y2="{axis_y + 5}" '
                   'stroke="black"/>')
        out.append(f'<text x="{x:.2f}" y="{axis_y + 18}" text-anchor="middle">'
                   f'{k * tick:.6g}</text>')
        k += 1
    out.append("</svg>")
    return "\n".join(out) + "\n"
