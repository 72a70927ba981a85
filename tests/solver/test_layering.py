"""The contract and the timing know neither algorithms nor drawing (issue 11)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOLVER = Path(__file__).resolve().parents[2] / "solver"


def _imports(module: str) -> set[str]:
    tree = ast.parse((SOLVER / module).read_text())
    names: set[str] = set()
    for node in ast.walk(tree):  # also imports inside functions
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize(("module", "allowed"), [
    ("schedule.py", {"ppsched.solver.model.errors", "ppsched.solver.model.ops", "ppsched.solver.model.profile"}),
    ("simulator.py", {"ppsched.solver.model.bounds", "ppsched.solver.model.errors", "ppsched.solver.sim.lanes", "ppsched.solver.model.ops",
                      "ppsched.solver.model.profile"}),
])
def test_contract_and_timing_import_no_algorithm_or_drawing(module: str,
                                                            allowed: set[str]) -> None:
    ours = {name for name in _imports(module) if name.startswith("solver")}
    assert ours <= allowed, ours - allowed


def test_schedule_invalid_draws_its_grid_when_read() -> None:
    from ppsched.solver.model.errors import ScheduleInvalid, Violation
    from ppsched.solver.model.ops import Op

    order = [[Op("B", 0, 0), Op("F", 0, 0)]]
    error = ScheduleInvalid([Violation("deadlock", "B0 before F0", 0, 0)], order=order)
    assert error.order is order
    assert "ERROR" in error.grid and "F0" in error.grid
    assert str(error) == "schedule invalid (1 violation): B0 before F0"
