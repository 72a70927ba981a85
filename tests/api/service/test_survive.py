"""Jobs that survive their replica (SQLite store, real servers): SIGTERM hands a running
job back to the queue with its best schedule so far, and another replica resumes it; a
job whose replica keeps dying is failed after PPSCHED_JOB_MAX_ATTEMPTS, with the reason
and its best schedule."""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
from ppsched.solver.model.schedule import parse_schedule

from tests.api.service.conftest import HARD, wait_for_job
from tests.api.service.postgres import wait_until

ILP = {"profile": HARD, "method": "ilp", "time_limit_s": 120.0}


def _row(db: Path, job_id: str) -> tuple[Any, ...]:
    with sqlite3.connect(db) as conn:
        return tuple(conn.execute(
            "SELECT status, schedule_id, best, attempts, ends, (SELECT COUNT(*) FROM leases "
            "WHERE job_id = jobs.id) FROM jobs WHERE id = ?", (job_id,)).fetchone())


def _objective(client: httpx.Client, schedule_id: str) -> float:
    schedule = parse_schedule(client.get(f"/v1/schedules/{schedule_id}").json())
    assert schedule.solver is not None
    return schedule.solver.objective


def test_sigterm_hands_a_running_job_back_and_another_replica_resumes_it(
        start_server: Any, tmp_path: Path) -> None:
    grace = 6.0
    # A lease far longer than the test: the job can only come back by being handed back.
    settings = {"workers": 1, "job_lease_s": 600, "checkpoint_interval_s": 0.5,
                "shutdown_grace_s": grace}
    first = start_server(**settings)
    job_id = first.client.post("/v1/jobs", json=ILP).json()["id"]
    running = wait_for_job(first.client, job_id, ("running",), timeout_s=120,
                           has_progress=True)
    checkpoint = _objective(first.client, running["schedule_id"])
    began = time.monotonic()
    first.stop()  # SIGTERM
    assert time.monotonic() - began < grace + 3  # the grace, and the interpreter's exit
    # uvicorn re-raises the SIGTERM it handled once the app has shut down.
    assert first.process.returncode in (0, -signal.SIGTERM)
    status, schedule_id, best, attempts, ends, leases = _row(first.db_path, job_id)
    # Queued again, not failed: its lease released, its best so far kept (no worse than
    # the checkpoint seen while it ran: CP-SAT handed back its best on the way out).
    assert (status, attempts, ends, leases) == ("queued", 0, 0, 0)
    assert schedule_id and best is not None and best <= checkpoint + 1e-9

    second = start_server(**settings)
    resumed = wait_for_job(second.client, job_id, ("running",), timeout_s=120,
                           has_progress=True)
    assert resumed["attempts"] == 0
    cancelled = second.client.delete(f"/v1/jobs/{job_id}").json()
    assert cancelled["status"] == "cancelled" and cancelled["schedule_id"]
    # The re-run started from the handed-back schedule: it ends no worse.
    assert _objective(second.client, cancelled["schedule_id"]) <= best + 1e-9


def test_a_job_whose_replica_keeps_dying_fails_after_the_maximum(start_server: Any) -> None:
    settings = {"workers": 1, "job_lease_s": 2, "job_max_attempts": 2,
                "job_retry_backoff_s": 0.2, "checkpoint_interval_s": 0.5}
    server = start_server(**settings)
    job_id = server.client.post("/v1/jobs", json=ILP).json()["id"]
    for attempt in range(2):
        def running_here(server: Any = server, attempt: int = attempt) -> bool:
            job = server.client.get(f"/v1/jobs/{job_id}").json()
            return bool(job["status"] == "running" and job["attempts"] == attempt and
                        job["progress"])

        wait_until(running_here, 120, f"attempt {attempt} running")
        server.stop(kill=True)
        server = start_server(**settings)
    failed = wait_for_job(server.client, job_id, ("failed",), timeout_s=60)
    assert failed["attempts"] == 2
    assert "worker lost 2 times" in failed["error"] and "JOB_MAX_ATTEMPTS" in failed["error"]
    assert failed["schedule_id"]  # its best schedule so far stays with it
    assert _objective(server.client, failed["schedule_id"]) > 0
    assert _row(server.db_path, job_id)[4:] == (1, 0)  # ended once, no lease left


# Unequal stages under a memory limit, where CP-SAT improves on the heuristic early and
# searches on: under its work limit (deterministic, whatever the load) the heuristic's
# 88.8 becomes 88.7 after about a third of the search (measured: 3.7 of 11 CPU seconds).
IMPROVABLE = {"name": "unequal-p4-m12", "num_ranks": 4, "num_microbatches": 12,
              "t_f": [1, 3, 1, 2], "t_b": [2, 5, 2, 3], "t_w": [1, 2, 1, 1], "t_comm": 0.1,
              "m_b": 1.0, "m_w": 0.5, "memory_limit": 5.0}


def test_a_cpsat_improvement_is_checkpointed_and_a_rerun_resumes_from_it(
        start_server: Any) -> None:
    """The issue's case: progress showed CP-SAT's 1343.10 but the job ended with the
    heuristic's 1347.75, since improvements were never saved."""
    settings = {"workers": 1, "job_lease_s": 3, "checkpoint_interval_s": 0.5}
    first = start_server(**settings)
    request = {"profile": IMPROVABLE, "method": "ilp", "work_limit": 10.0}
    job_id = first.client.post("/v1/jobs", json=request).json()["id"]
    heuristic = _objective(first.client, wait_for_job(
        first.client, job_id, ("running",), timeout_s=120, has_progress=True)["schedule_id"])
    seen: dict[str, Any] = {}
    objectives: dict[str, float] = {}  # by schedule id: each checkpoint read once

    def improved_checkpoint() -> bool:
        job = first.client.get(f"/v1/jobs/{job_id}").json()
        assert job["status"] == "running", f"ended before an improvement was seen: {job}"
        seen.update(job)
        if job["schedule_id"] not in objectives:
            objectives[job["schedule_id"]] = _objective(first.client, job["schedule_id"])
        return objectives[job["schedule_id"]] < heuristic - 1e-6

    wait_until(improved_checkpoint, 600, "a checkpoint better than the heuristic's")
    first.stop(kill=True)
    second = start_server(**settings)
    body = second.client.get(f"/v1/schedules/{seen['schedule_id']}").json()
    checkpoint = parse_schedule(body)
    assert checkpoint.solver is not None and checkpoint.metrics is not None
    assert checkpoint.method.startswith("ilp-") and checkpoint.solver.status == "feasible"
    improvement = checkpoint.solver.objective

    def rerun() -> bool:  # running again, with progress of its own (a new clock)
        job = second.client.get(f"/v1/jobs/{job_id}").json()
        return bool(job["attempts"] == 1 and job["status"] == "running" and
                    job["progress"]["elapsed_s"] < seen["progress"]["elapsed_s"])

    wait_until(rerun, 120, "the job re-run on the second replica")
    # The re-run's incumbent is the checkpoint, not the heuristic's schedule.
    assert second.client.get(f"/v1/jobs/{job_id}").json()["progress"]["best"] <= \
        improvement + 1e-9
    ended = second.client.delete(f"/v1/jobs/{job_id}").json()
    assert ended["status"] == "cancelled"
    assert _objective(second.client, ended["schedule_id"]) <= improvement + 1e-9
