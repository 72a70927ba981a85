"""A running job's best schedule so far, from its own process: the incumbent a re-run
resumes from, and the checkpoints of CP-SAT's improvements.

In the job's process, `Checkpointer` takes note of each improvement the exact search
reports (`ppsched.solver.exact.improvements`, on the search's threads, so it only keeps
the orders) and, from a thread of its own, at most every PPSCHED_CHECKPOINT_INTERVAL_S,
builds the best one's schedule (simulated and validated, as every schedule the service
emits) and sends it to the service as an ("incumbent", JobResult); the service stores it
as the job's checkpoint. A job re-run after its replica was lost starts from the stored
checkpoint: its answer is never worse than it (`resumed`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from ppsched.api.service.worker import JobResult, job_result, schedule_json
from ppsched.solver.model import Orders, ScheduleInvalid
from ppsched.solver.sim import schedule_from_orders

log = logging.getLogger(__name__)
Send = Callable[[tuple[str, Any]], None]
# The name an intermediate CP-SAT schedule carries (the final one's is the pipeline's).
_METHOD = "ilp-cpsat"


class Checkpointer:
    """Sends the search's best schedule so far, at most every `interval_s`."""

    def __init__(self, send: Send, spec: dict[str, Any], key: str, interval_s: float,
                 floor: float | None) -> None:
        """`floor`: the objective already checkpointed (the heuristic's or a resumed
        checkpoint's); only better schedules are sent."""
        self.send, self.spec, self.key, self.interval_s = send, spec, key, interval_s
        self.sent = floor if floor is not None else float("inf")
        self._pending: tuple[Any, Orders, float] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="checkpointer", daemon=True)

    def note(self, profile: Any, orders: Orders, objective: float) -> None:
        """An improvement (called on the search's thread: only remembered here)."""
        with self._lock:
            if objective < self.sent - 1e-9 and (self._pending is None or
                                                 objective < self._pending[2]):
                self._pending = (profile, orders, objective)

    def __enter__(self) -> Checkpointer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.flush()

    def flush(self) -> None:
        """Send the pending improvement now, if any."""
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is None:
            return
        profile, orders, objective = pending
        try:
            schedule = schedule_from_orders(profile, orders, _METHOD, status="feasible",
                                            objective=self.spec["objective"])
        except ScheduleInvalid:  # never expected: the search's orders are re-timed valid
            log.exception("an improvement did not validate: not checkpointed")
            return
        result = job_result(schedule_json(schedule, self.spec), self.key)
        with self._lock:
            self.sent = min(self.sent, objective)
        self.send(("incumbent", result))


def resumed(body: str, key: str) -> JobResult:
    """A stored checkpoint's body (the schedule with its id and links) as the JobResult of
    the request `key`, so that a re-run can end with it."""
    schedule = json.loads(body)
    schedule.pop("id", None)
    schedule.pop("links", None)
    return job_result(json.dumps(schedule), key)
