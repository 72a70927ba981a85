"""The independent contract checker (``../shared/contract-checker``), for tests that hold
a figure against something other than the project's own simulator.

The checker re-times a schedule JSON by DESIGN.md alone and imports nothing of ppsched;
``cut.judge`` also checks that a V or loop layout is a fair cut of the posted profile
(DESIGN.md 6.6). A missing checker fails under CI and skips elsewhere (`tests.needs`).
"""

from __future__ import annotations

import importlib
import json
import sys
from types import ModuleType
from typing import Any

from ppsched.solver.model.schedule import Schedule

from tests.needs import shared_path


def _cut_module() -> ModuleType:
    folder = str(shared_path("contract-checker"))
    if folder not in sys.path:
        sys.path.append(folder)  # cut.py imports its sibling check.py by name
    return importlib.import_module("cut")


def contract_cost(schedule: Schedule, posted: dict[str, Any] | None = None) -> float:
    """The schedule's cost as the contract checker re-times it, judged against the
    profile the user `posted` (by default the schedule's own); asserts it is valid."""
    data = json.loads(schedule.model_dump_json())
    result = _cut_module().judge(data, posted if posted is not None else data["profile"])
    assert result["valid"], result["errors"][:3]
    return float(result["cost"])
