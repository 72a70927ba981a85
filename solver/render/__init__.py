"""Views of a schedule: SVG Gantt chart, Chrome trace, torch CSV (in and out).
"""

from ppsched.solver.render.csv_import import read_torch_csv
from ppsched.solver.render.svg import render_svg
from ppsched.solver.render.torch_csv import (
    DROPPED_KINDS,
    dropped_note,
    note_of_counts,
    render_torch_csv,
)
from ppsched.solver.render.trace import render_trace

__all__ = [
    "DROPPED_KINDS",
    "dropped_note",
    "note_of_counts",
    "read_torch_csv",
    "render_svg",
    "render_torch_csv",
    "render_trace",
]
