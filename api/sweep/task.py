"""One sweep row: solve a task where it runs (a local process or a Dask worker).

`run_task` never raises for a row a method refuses: the row gets status "error" and the
message, so one bad configuration never stops a sweep.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from ppsched.api.sweep.expand import Task
from ppsched.solver.model import ProfileError, ScheduleInvalid, SolverError, parse_profile
from ppsched.solver.solving import ExactOptions, Layout, parse_layouts, solve

log = logging.getLogger(__name__)

RESULT_FIELDS = ("status", "error", "layout", "cost", "makespan", "bubble_rate",
                 "peak_memory", "lower_bound", "gap", "solver_wall_s", "wall_s", "schedule")


def run_task(task: Task, keep_dir: str | None = None) -> dict[str, Any]:
    """Solve one task; the row: key, configuration, method and the result fields.

    Args:
        task: what to solve.
        keep_dir: when given, the schedule JSON is written there as ``KEY.json``.
    """
    began = time.perf_counter()
    row: dict[str, Any] = {"key": task.key, **task.config, "method": task.method,
                           "objective": task.objective}
    row.update(dict.fromkeys(RESULT_FIELDS))
    try:
        profile = parse_profile(task.profile)
        exact = ExactOptions(time_limit_s=task.options.get("time_limit_s"),
                             work_limit=task.options.get("work_limit"), workers=1) \
            if "time_limit_s" in task.options or "work_limit" in task.options else None
        schedule = solve(profile, task.method, task.objective, exact=exact,
                         layouts=_layouts(task.options))
    except (ProfileError, ScheduleInvalid, SolverError) as exc:
        row.update(status="error", error=str(exc))
    except Exception as exc:  # a solver bug must not stop the sweep: the row says what
        log.warning("row %s (%s) failed: %r", task.key, task.method, exc)
        row.update(status="error", error=f"{type(exc).__name__}: {exc}")
    else:
        metrics, info = schedule.metrics, schedule.solver
        assert metrics is not None and info is not None
        # The layout the answer took (DESIGN.md 6.6): the solver may cut a v = 1 row.
        row.update(status=info.status, layout=info.layout, cost=metrics.cost,
                   makespan=metrics.makespan, bubble_rate=metrics.bubble_rate,
                   peak_memory=max(metrics.peak_memory),
                   lower_bound=metrics.lower_bound, gap=info.gap, solver_wall_s=info.wall_s)
        if keep_dir is not None:
            row["schedule"] = _keep(schedule.model_dump(mode="json"), keep_dir, task.key)
    row["wall_s"] = time.perf_counter() - began
    return row


def _layouts(options: dict[str, Any]) -> tuple[Layout, ...]:
    """The layouts a row may take: its own where the grid sweeps `v`, else the solver's
    default (every layout)."""
    text = options.get("layouts")
    return parse_layouts(text) if text else ()


def ignore_sigint() -> None:
    """Process-pool initializer: Ctrl-C is the parent's to handle, not each worker's."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _keep(data: dict[str, Any], keep_dir: str, key: str) -> str:
    target = Path(keep_dir) / f"{key}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    with os.fdopen(fd, "w") as out:
        json.dump(data, out)
    os.replace(tmp, target)
    return str(target)
