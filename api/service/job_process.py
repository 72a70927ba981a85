"""A job's process: the heuristic's schedule first (ilp), then the solve, reporting its
incumbent, checkpoints of its improvements, progress and result over a pipe; a re-run
starts CP-SAT from the checkpoint its earlier run left, when that beats the heuristic.
Nothing here touches the store or the network.

A job stops early on SIGINT: CP-SAT ends its search and returns the best schedule found
so far, which the job hands back as its result.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from ppsched.api.service.checkpoint import Checkpointer, resumed
from ppsched.api.service.worker import (
    JobResult,
    job_result,
    layouts_of,
    schedule_json,
    watch_parent,
)
from ppsched.solver.exact import listening
from ppsched.solver.model import (
    ProfileError,
    Schedule,
    ScheduleInvalid,
    parse_profile,
    parse_schedule,
)
from ppsched.solver.solving import ILP, ExactOptions, solve


def started() -> None:
    """An empty job: the fork server's warm-up (`jobs.warm_up`)."""


def run_job(conn: Connection, spec: dict[str, Any], key: str, cpsat_workers: int,
            checkpoint_interval_s: float = 3.0, resume: tuple[str, float] | None = None,
            service_pid: int | None = None) -> None:
    """A job's process: sends ("incumbent", job_result) when the heuristic's schedule is
    known (ilp only) and then at most every `checkpoint_interval_s` when CP-SAT has
    improved on it, ("progress", (s, best, bound)) at each improvement, then ("done",
    job_result) or ("error", message).

    `resume`: the body and objective of the checkpoint a previous run of the job left
    (its replica was lost): the job's answer is never worse than it. `service_pid`: the
    service that runs the job; the process exits when it is gone."""
    watch_parent(service_pid=service_pid)
    began = time.perf_counter()
    lock = threading.Lock()  # the search's threads, the checkpointer's and this one send

    def send(message: tuple[str, Any]) -> None:
        with lock:
            conn.send(message)

    try:
        profile = parse_profile(spec["profile"])
        floor: JobResult | None = None
        start_from: Schedule | None = None
        if spec["method"] == ILP:
            # The exact search starts from the heuristic: its schedule is the best so far,
            # unless an earlier run of the job left a better checkpoint.
            start = solve(profile, "heuristic", spec["objective"], layouts=layouts_of(spec))
            floor = job_result(schedule_json(start, spec), key)
            if resume is not None and floor[4] is not None and resume[1] < floor[4] - 1e-9:
                floor = resumed(resume[0], key)
                if profile.problem.uniform_microbatches:  # CP-SAT goes on from it
                    start_from = parse_schedule(json.loads(resume[0]))
            send(("incumbent", floor))

        def progress(point: tuple[float, float, float]) -> None:
            send(("progress", (time.perf_counter() - began, point[1], point[2])))

        options = ExactOptions(backend=spec["backend"], time_limit_s=spec["time_limit_s"],
                               work_limit=spec.get("work_limit"), workers=cpsat_workers)
        # Unequal microbatches are solved in a chosen order of entry: an improvement's
        # schedule would echo the reordered profile, so only uniform ones checkpoint.
        listens = spec["method"] == ILP and profile.problem.uniform_microbatches
        checkpointer = Checkpointer(send, spec, key, checkpoint_interval_s,
                                    floor[4] if floor is not None else None)
        with checkpointer:
            with listening(checkpointer.note) if listens \
                    else contextlib.nullcontext():
                schedule = solve(profile, spec["method"], spec["objective"], exact=options,
                                 on_progress=progress if spec["method"] == ILP else None,
                                 layouts=layouts_of(spec), start=start_from)
        done = job_result(schedule_json(schedule, spec), key)
        if floor is not None and floor[4] is not None and done[4] is not None and \
                floor[4] < done[4] - 1e-9:
            done = floor  # a resumed checkpoint the re-run did not beat
        send(("done", done))
    except (ProfileError, ScheduleInvalid) as exc:
        send(("error", str(exc)))
    except KeyboardInterrupt:
        send(("error", "cancelled before the search started"))
    finally:
        conn.close()
