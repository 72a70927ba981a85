"""torch.distributed.pipelining's per-rank schedule CSV: writing it, and reading it back.

One row per rank, one action per cell, as ``PipelineScheduleMulti._dump_csv`` writes and
``_load_csv`` reads (``str(_Action)``: stage, action, microbatch). Our ``B`` is torch's
``I`` and our ``BW`` is torch's ``B`` (DESIGN.md section 4).

torch's CSV has no recompute or copy actions (DESIGN.md 6.3): writing drops ``R``, ``O``
and ``L``, and `dropped_note` says what was dropped (the CLI prints it on stderr, the
service sends it in a header), since the file alone would not show it.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from ppsched.solver.model.ops import Op, op_from_torch
from ppsched.solver.model.schedule import Schedule

# torch's compute actions with a microbatch (``_ComputationType`` F, I, W, B).
_COMPUTE = re.compile(r"^\d+[FIWB]\d+$")
# torch's other actions: communication, FSDP (un)sharding and gradient reduction. They are
# added by torch's lowering passes and carry no compute, so reading skips them.
_OTHER = re.compile(r"^\d+(SEND_F|RECV_F|SEND_B|RECV_B|UNSHARD|RESHARD|REDUCE_GRAD)\d*$")
# A fused forward+backward pair: ``(0F1;3B0)OVERLAP_F_B``; read as its sub-actions in order.
_OVERLAP = re.compile(r"^\((.*)\)OVERLAP_F_B$")


def render_torch_csv(schedule_or_orders: Schedule | Sequence[Sequence[Op]]) -> str:
    """torch's per-rank CSV of a schedule: one line per rank, e.g. ``0F0,0F1,0I0,0W0``.

    ``R``, ``O`` and ``L`` ops are left out (torch has no such actions; see
    `dropped_note`).

    Args:
        schedule_or_orders: a Schedule, or per-rank op orders (``list[list[Op]]``).

    Returns:
        The CSV text, ``\\n`` line endings, one line per rank (empty for a rank without ops).
    """
    if isinstance(schedule_or_orders, Schedule):
        orders: Sequence[Sequence[Op]] = schedule_or_orders.orders()
    else:
        orders = schedule_or_orders
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for ops in orders:
        writer.writerow([op.to_torch() for op in ops if op.kind not in DROPPED_KINDS])
    return buffer.getvalue()


# Activation-policy ops (DESIGN.md 6.3) torch's CSV cannot express.
DROPPED_KINDS = ("R", "O", "L")


def dropped_note(schedule_or_orders: Schedule | Sequence[Sequence[Op]]) -> str | None:
    """What `render_torch_csv` leaves out of this schedule, in one line; None when
    nothing (a schedule without recompute or offload)."""
    if isinstance(schedule_or_orders, Schedule):
        orders: Sequence[Sequence[Op]] = schedule_or_orders.orders()
    else:
        orders = schedule_or_orders
    counts = Counter(str(op.kind) for ops in orders for op in ops if op.kind in DROPPED_KINDS)
    return note_of_counts(counts)


def note_of_counts(counts: Mapping[str, int]) -> str | None:
    """The note of `dropped_note` from counts of dropped kinds."""
    if not any(counts.values()):
        return None
    listed = ", ".join(f"{counts[k]} {k}" for k in DROPPED_KINDS if counts.get(k))
    return (f"torch CSV drops {listed} ops: it has no recompute (R) or offload/reload "
            "(O/L) actions, so a runtime reading it keeps every activation")


def parse_torch_csv(text: str) -> list[list[Op]]:
    """Read torch's per-rank CSV back as per-rank op orders.

    Empty cells (idle steps) and non-compute actions (``1SEND_F0``, ``0RECV_B3``,
    ``0UNSHARD``, ...) are skipped; ``OVERLAP_F_B`` cells count as their sub-actions.

    Args:
        text: the CSV, one row per rank (rank = row index).

    Returns:
        For each rank, its compute ops in order, with our kinds (torch's ``I`` is our ``B``,
        its ``B`` our ``BW``).

    Raises:
        ValueError: naming the line, the cell and its text, for a cell that is neither a
            compute action, a known torch action, nor empty.
    """
    orders: list[list[Op]] = []
    for line, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        ops: list[Op] = []
        for column, cell in enumerate(row, start=1):
            ops += _parse_cell(cell, line, column)
        orders.append(ops)
    return orders


def _parse_cell(cell: str, line: int, column: int) -> list[Op]:
    action = cell.strip()
    if not action or _OTHER.match(action):
        return []
    if _COMPUTE.match(action):
        return [op_from_torch(action)]
    overlap = _OVERLAP.match(action)
    if overlap:
        return [op for part in overlap.group(1).split(";")
                for op in _parse_cell(part, line, column)]
    raise ValueError(f"torch CSV line {line}, cell {column}: {cell!r} is not a pipeline "
                     "action (expected a compute action such as 0F3, 0I3, 0W3 or 0B3, a "
                     "communication action such as 1SEND_F3 or 0RECV_B2, or an empty cell)")
