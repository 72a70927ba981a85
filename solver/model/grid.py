"""Text grids of a schedule: by position (for violations) and by time (idle shown).

The order grid follows torch.distributed.pipelining's validator: one row per rank, one
column per step, and every violation marked where it happens (``<-- ERROR HERE``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ppsched.solver.model.ops import Op, lane_of

if TYPE_CHECKING:  # errors.py draws its grid with this module
    from ppsched.solver.model.errors import Violation

_MAX_STEPS = 48  # columns of the order grid; wider schedules show a window around errors


def _cell(op: Op, multi_stage: bool) -> str:
    return op.cell(with_stage=multi_stage)


def order_grid(order: Sequence[Sequence[Op]], violations: Sequence[Violation] = ()) -> str:
    """One row per rank, one column per position; violated cells are starred and listed."""
    multi = _multi_stage(order)
    marked = {(v.rank, v.position) for v in violations if v.position is not None}
    width = max((len(_cell(op, multi)) + 1 for ops in order for op in ops), default=3)
    steps = max((len(ops) for ops in order), default=0)
    positions = [v.position for v in violations if v.position is not None]
    lo = 0
    if steps > _MAX_STEPS and positions:
        lo = max(0, min(min(positions) - 4, max(positions) + 4 - _MAX_STEPS))
    hi = min(steps, lo + _MAX_STEPS)
    label = len(f"rank {len(order) - 1}")
    lines = [" " * (label + 3) + "".join(f"{i:<{width + 1}}" for i in range(lo, hi))
             + (" ..." if hi < steps else "")]
    for r, ops in enumerate(order):
        cells = []
        for i in range(lo, min(hi, len(ops))):
            text = ("*" if (r, i) in marked else "") + _cell(ops[i], multi)
            cells.append(f"{text:<{width + 1}}")
        row = f"{'rank ' + str(r):<{label}} | " + "".join(cells).rstrip()
        mine = [v for v in violations if v.rank == r]
        if mine:
            row += "   <-- ERROR HERE: " + " | ".join(v.message for v in mine[:2])
        lines.append(row)
    orphans = [v for v in violations if v.rank is None]
    lines += [f"  * {v.message}" for v in orphans]
    return "\n".join(lines)


def time_grid(order: Sequence[Sequence[Op]], start: Sequence[Sequence[float | None]],
              end: Sequence[Sequence[float | None]], max_columns: int = 160,
              copy_lanes: int = 2) -> str:
    """One row per rank along a time axis: each op fills its duration, idle is ``.``.

    The time unit of one column is the shortest op's duration, or coarser when the chart
    would be wider than `max_columns`; each op then takes at least one column. A rank's
    copies (O, L; DESIGN.md 6.3) run beside its compute, so each copy lane it uses gets a
    row of its own under it (``d2h``, ``h2d``, or ``copy`` with `copy_lanes` 1).
    """
    multi = _multi_stage(order)
    durations = [e - s for st, en in zip(start, end, strict=True)
                 for s, e in zip(st, en, strict=True)
                 if s is not None and e is not None and e > s]
    times = [e for en in end for e in en if e is not None]
    if not durations or not times:
        return order_grid(order)
    origin = min(s for st in start for s in st if s is not None)
    total = max(times) - origin
    width = max(len(_cell(op, multi)) for ops in order for op in ops) + 1
    unit = max(min(durations), total * width / max_columns)
    label = len(f"rank {len(order) - 1}")
    lines = [f"{'':<{label}}   one column of {width} characters = {unit:g} time units; "
             "'.' is idle"]
    for r, ops in enumerate(order):
        lanes: dict[str, list[int]] = {"compute": []}  # a rank's row even when idle
        for i, op in enumerate(ops):
            lanes.setdefault(lane_of(op.kind, copy_lanes), []).append(i)
        for lane in ("compute", "d2h", "h2d", "copy"):
            if lane not in lanes:
                continue
            name = f"rank {r}" if lane == "compute" else lane
            row = _time_row([(ops[i], start[r][i], end[r][i]) for i in lanes[lane]],
                            origin, unit, width, multi)
            lines.append(f"{name:<{label}} | " + row)
    return "\n".join(lines)


def _time_row(timed: Sequence[tuple[Op, float | None, float | None]], origin: float,
              unit: float, width: int, multi: bool) -> str:
    """One lane's ops on the time axis of `time_grid`."""
    row = []
    column = 0
    for op, s, e in timed:
        if s is None or e is None:
            break
        first = round((s - origin) / unit)
        last = max(first + 1, round((e - origin) / unit))
        if first > column:
            row.append(("." + " " * (width - 1)) * (first - column))
        text = _cell(op, multi)
        row.append(f"{text:<{width}}" + ("-" * (width - 1) + " ") * (last - first - 1))
        column = last
    return "".join(row).rstrip()


def _multi_stage(order: Sequence[Sequence[Op]]) -> bool:
    return any(len({op.stage for op in ops}) > 1 for ops in order)
