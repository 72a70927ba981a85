"""Microbatch sizes for the views (DESIGN.md 6.2): with unequal microbatches each view
labels a microbatch by its size, so a reader sees which long one sits where.

A size is the microbatch's total op time over the mean microbatch's
(`Problem.microbatch_sizes`), taken in the schedule's numbering: op microbatch ``j`` is
input microbatch ``microbatch_order[j]``.
"""

from __future__ import annotations

from ppsched.solver.model.schedule import Schedule


def microbatch_sizes(schedule: Schedule) -> tuple[float, ...] | None:
    """Each scheduled microbatch's size relative to the mean, or None when the
    microbatches are alike (the views then stay as they were)."""
    problem = schedule.profile.problem
    if problem.uniform_microbatches:
        return None
    return problem.reordered(schedule.microbatch_order).microbatch_sizes


def input_microbatch(schedule: Schedule, microbatch: int) -> int:
    """The input microbatch (the profile's numbering) that scheduled `microbatch` is."""
    order = schedule.microbatch_order
    return microbatch if order is None else order[microbatch]


def size_label(size: float) -> str:
    """``1.7x``: two significant digits are enough to tell microbatches apart."""
    return f"{size:.2g}x"
