"""A schedule error carries its order and draws the grid only when it is read (the import
rules themselves: tests/test_imports.py)."""

from __future__ import annotations


def test_schedule_invalid_draws_its_grid_when_read() -> None:
    from ppsched.solver.model.errors import ScheduleInvalid, Violation
    from ppsched.solver.model.ops import Op

    order = [[Op("B", 0, 0), Op("F", 0, 0)]]
    error = ScheduleInvalid([Violation("deadlock", "B0 before F0", 0, 0)], order=order)
    assert error.order is order
    assert "ERROR" in error.grid and "F0" in error.grid
    assert str(error) == "schedule invalid (1 violation): B0 before F0"
