"""What runs in worker processes: a synchronous solve, and a job's life (incumbent,
progress, result) reported over a pipe. Nothing here touches the store or the network.

A job stops early on SIGINT: CP-SAT ends its search and returns the best schedule found
so far, which the job hands back as its result.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from solver.errors import ProfileError, ScheduleInvalid
from solver.profile import parse_profile
from solver.solve import ILP, ExactOptions, solve

log = logging.getLogger(__name__)


def watch_parent(interval_s: float = 1.0) -> None:
    """Exit this worker when the service process that started it is gone (killed, not
    shut down), so no orphan keeps solving for nobody."""
    parent = os.getppid()

    def _watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=_watch, name="watch-parent", daemon=True).start()


def solve_json(spec: dict[str, Any], cpsat_workers: int) -> tuple[str, Any]:
    """Solve one request: ("ok", schedule JSON of DESIGN.md section 4), or
    ("profile_error", (field, value, accepted)) or ("invalid", message) for what the
    solver refuses (exceptions with their own arguments do not cross processes whole)."""
    try:
        profile = parse_profile(spec["profile"])
        options = ExactOptions(backend=spec["backend"], time_limit_s=spec["time_limit_s"],
                               workers=cpsat_workers)
        schedule = solve(profile, spec["method"], spec["objective"], exact=options)
    except ProfileError as exc:
        return "profile_error", (exc.field, _plain(exc.value), exc.accepted)
    except ScheduleInvalid as exc:
        return "invalid", str(exc)
    return "ok", schedule.model_dump_json()


def _plain(value: Any) -> Any:
    return value if isinstance(value, int | float | str | list | dict | None) else repr(value)


def run_job(conn: Connection, spec: dict[str, Any], cpsat_workers: int) -> None:
    """A job's process: sends ("incumbent", json) when the heuristic's schedule is known
    (ilp only), ("progress", (s, best, bound)) at each improvement, then ("done", json)
    or ("error", message)."""
    watch_parent()
    began = time.perf_counter()
    try:
        profile = parse_profile(spec["profile"])
        if spec["method"] == ILP:
            # The exact search starts from the heuristic: its schedule is the best so far.
            start = solve(profile, "heuristic", spec["objective"])
            conn.send(("incumbent", start.model_dump_json()))

        def progress(point: tuple[float, float, float]) -> None:
            conn.send(("progress", (time.perf_counter() - began, point[1], point[2])))

        options = ExactOptions(backend=spec["backend"], time_limit_s=spec["time_limit_s"],
                               workers=cpsat_workers)
        schedule = solve(profile, spec["method"], spec["objective"], exact=options,
                         on_progress=progress if spec["method"] == ILP else None)
        conn.send(("done", schedule.model_dump_json()))
    except (ProfileError, ScheduleInvalid) as exc:
        conn.send(("error", str(exc)))
    except KeyboardInterrupt:
        conn.send(("error", "cancelled before the search started"))
    finally:
        conn.close()
