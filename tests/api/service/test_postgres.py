"""Two service replicas (real `ppsched serve` processes) on one real PostgreSQL server:
they share the job queue, and one of them is killed at random moments while 50 jobs
run. Every job ends exactly once, and a job whose replica died keeps its best schedule."""

from __future__ import annotations

import random
import signal
import time
from typing import Any

import psycopg
import pytest
from ppsched.api.service.config import Settings
from ppsched.api.service.store import FINAL_STATUSES, StoreSettingError, open_store
from ppsched.solver.model.schedule import parse_schedule

from tests.api.service.conftest import EASY, HARD, Server
from tests.api.service.postgres import PostgresServer, wait_until

JOBS = 50


def _rows(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def _requests() -> list[dict[str, Any]]:
    """50 distinct jobs: quick heuristic solves and a few CP-SAT searches that report a
    checkpointed incumbent before their time limit."""
    requests: list[dict[str, Any]] = []
    for i in range(JOBS):
        if i % 5 == 0:
            requests.append({"profile": {**HARD, "t_f": HARD["t_f"] + i / 1000},
                             "method": "ilp", "time_limit_s": 4.0})
        else:
            requests.append({"profile": {**EASY, "t_f": EASY["t_f"] + i / 1000},
                             "method": ["heuristic", "zb-h1", "1f1b", "gpipe"][i % 4]})
    return requests


def test_two_replicas_on_postgres_survive_random_kills(postgres: PostgresServer,
                                                       start_server: Any) -> None:
    url = postgres.new_database()
    settings = {"database_url": url, "job_lease_s": 6, "job_workers": 2, "workers": 1,
                "max_queued_jobs": 100}
    steady = start_server(**settings)
    victim: Server = start_server(**settings)
    ids = []
    for i, request in enumerate(_requests()):
        server = steady if i % 2 else victim
        response = server.client.post("/v1/jobs", json=request)
        assert response.status_code == 202, response.text
        ids.append(response.json()["id"])
    assert len(set(ids)) == JOBS

    rng = random.Random(15)
    killed: dict[str, str] = {}  # job id -> its checkpoint when its replica was killed
    lost: set[str] = set()  # every job running on a killed replica
    for _ in range(3):
        owner = f"{victim.process.pid}-"
        # Wait (on state) until the victim runs a job with a checkpoint, then kill it at
        # a random moment of that job's search.
        found: list[tuple[str, str]] = []

        def running_with_checkpoint(owner: str = owner,
                                    found: list[tuple[str, str]] = found) -> bool:
            found[:] = _rows(url, "SELECT jobs.id, jobs.schedule_id FROM jobs JOIN leases ON "
                             "leases.job_id = jobs.id WHERE leases.owner LIKE %s AND "
                             "jobs.status = 'running' AND jobs.schedule_id IS NOT NULL",
                             owner + "%")
            pending = _rows(url, "SELECT COUNT(*) FROM jobs WHERE status IN ('queued', "
                            "'running')")[0][0]
            return bool(found) or pending == 0

        wait_until(running_with_checkpoint, 180, "a checkpointed job on the victim")
        if not found:
            break
        time.sleep(rng.uniform(0.0, 1.0))  # a random moment of that job's search
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait()
        killed.update(found)
        # Every job the dead replica held (its leases stay until they expire).
        lost.update(row[0] for row in _rows(url, "SELECT job_id FROM leases WHERE owner "
                                                 "LIKE %s", owner + "%"))
        victim.stop()
        victim = start_server(**settings)

    def all_final() -> bool:
        return _rows(url, "SELECT COUNT(*) FROM jobs WHERE status IN ('queued', "
                     "'running')")[0][0] == 0

    wait_until(all_final, 300, "every job final")
    assert killed, "no job was running on the killed replica"
    rows = _rows(url, "SELECT id, status, ends, schedule_id, error FROM jobs")
    assert len(rows) == JOBS
    for job_id, status, ends, schedule_id, error in rows:
        assert status in FINAL_STATUSES and ends == 1, (job_id, status, ends, error)
        if status == "done":
            assert schedule_id, job_id
        else:
            assert status == "failed" and "lease expired" in error, (job_id, error)
            # Failed because its replica died, with its best schedule so far if it had one
            # (a heuristic job has none before its end).
            assert job_id in lost, (job_id, error)
            assert schedule_id == killed.get(job_id), (job_id, schedule_id)
        if schedule_id:
            body = steady.client.get(f"/v1/schedules/{schedule_id}")
            assert body.status_code == 200
            assert parse_schedule(body.json()).metrics is not None
    for job_id in killed:  # killed mid-search: ended once, with a schedule
        status, schedule_id = _rows(url, "SELECT status, schedule_id FROM jobs WHERE id = %s",
                                    job_id)[0]
        assert status in ("failed", "done") and schedule_id
    assert not _rows(url, "SELECT job_id FROM leases")  # no lease outlives its job
    # Both replicas answer for every job, whichever ran it.
    assert steady.client.get(f"/v1/jobs/{ids[0]}").json() == \
        victim.client.get(f"/v1/jobs/{ids[0]}").json()


def test_a_bad_database_url_is_named() -> None:
    with pytest.raises(StoreSettingError, match=r"PPSCHED_DATABASE_URL.*postgresql://"):
        open_store(Settings(database_url="mysql://x@localhost/db"))
    with pytest.raises(StoreSettingError, match="cannot connect"):
        open_store(Settings(database_url="postgresql://nobody@127.0.0.1:1/none"))
