"""The error hierarchy of ppsched: what a user can cause, and what the solver reports.

"Infeasible" and "timeout" are result statuses, not exceptions (STYLE.md, choice 6).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

# The grid is drawn only when it is read (`ScheduleInvalid.grid`), by the service and the CLI.
from ppsched.solver.model.grid import order_grid

if TYPE_CHECKING:
    from ppsched.solver.model.ops import Op


class ProfileError(ValueError):
    """A profile, schedule file or solve option a user handed in is not acceptable.

    Attributes:
        field: dotted name of the offending field, e.g. ``t_b`` or ``memory_limit[3]``.
        value: the value that was given.
        accepted: what would have been accepted instead.
    """

    def __init__(self, field: str, value: Any, accepted: str) -> None:
        self.field = field
        self.value = value
        self.accepted = accepted
        super().__init__(f"invalid '{field}': got {_short(value)}; expected {accepted}")


@dataclass(frozen=True)
class Violation:
    """One way a schedule breaks the contract of DESIGN.md.

    Attributes:
        kind: ``unknown_op``, ``wrong_rank``, ``duplicate``, ``missing``, ``mixed_backward``,
            ``deadlock`` or ``memory``; with activation policies (DESIGN.md 6.3) also
            ``policy``, ``order``, ``host_memory``, and the timing rules of
            `solver.lane_rules`: ``recompute_early``, ``late_recompute``, ``late_reload``,
            ``lane_overlap``.
        message: one line saying what is wrong, with the numbers.
        rank: the rank the violation shows on, when there is one.
        position: the index in that rank's order, when there is one.
    """

    kind: str
    message: str
    rank: int | None = None
    position: int | None = None


class ScheduleInvalid(ValueError):
    """A schedule violates the contract; carries every violation and the grid that shows them.

    The simulator passes the `order` and the grid is drawn only when it is read (by the
    service and the CLI): the timing code knows no drawing. A caller that has the grid
    already may pass it instead.
    """

    def __init__(self, violations: Sequence[Violation], grid: str = "", *,
                 order: Sequence[Sequence[Op]] | None = None) -> None:
        self.violations = list(violations)
        self.order = order
        self._grid = grid
        count = len(self.violations)
        head = f"schedule invalid ({count} violation{'s' if count != 1 else ''}): "
        super().__init__(head + "; ".join(v.message for v in self.violations[:5])
                         + (f"; ... and {count - 5} more" if count > 5 else ""))

    @property
    def grid(self) -> str:
        """The order as a text grid with the violations marked ('' if it has no order)."""
        if not self._grid and self.order is not None:
            self._grid = order_grid(self.order, self.violations)
        return self._grid


class SolverError(RuntimeError):
    """A solver failed for a reason that is not the user's input (a bug or a broken backend)."""


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
