"""The embedded store: schedules (content-addressed JSON) and jobs, in one SQLite file,
so results and jobs survive a restart of the service."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JOB_STATUSES = ("queued", "running", "done", "failed", "cancelled")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS schedules (
    id TEXT PRIMARY KEY, body TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, status TEXT NOT NULL, request TEXT NOT NULL,
    request_key TEXT NOT NULL, progress TEXT, schedule_id TEXT, error TEXT,
    created REAL NOT NULL, updated REAL NOT NULL);
CREATE INDEX IF NOT EXISTS jobs_by_status ON jobs (status, created);
CREATE TABLE IF NOT EXISTS leases (
    job_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL,
    cancel INTEGER NOT NULL DEFAULT 0);
"""


@dataclass
class JobRecord:
    """One job as stored."""

    id: str
    status: str
    request: dict[str, Any]
    request_key: str
    progress: dict[str, float] | None
    schedule_id: str | None
    error: str | None
    created: float
    updated: float


class Store:
    """Schedules and jobs in SQLite (one connection, serialised by a lock: every call is
    a few milliseconds, made from the event loop's thread or a helper thread)."""

    def __init__(self, path: Path) -> None:
        path = Path(path)
        if str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def ping(self) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1").fetchone() == (1,)

    # Schedules.

    def get_schedule(self, schedule_id: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT body FROM schedules WHERE id = ?",
                                   (schedule_id,)).fetchone()
        return row[0] if row else None

    def put_schedule(self, schedule_id: str, body: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO schedules VALUES (?, ?, ?)",
                             (schedule_id, body, time.time()))

    # Jobs.

    def add_job(self, job_id: str, request: dict[str, Any], request_key: str) -> JobRecord:
        now = time.time()
        with self._lock:
            self._db.execute("INSERT INTO jobs VALUES (?, 'queued', ?, ?, NULL, NULL, NULL, "
                             "?, ?)", (job_id, json.dumps(request), request_key, now, now))
        job = self.get_job(job_id)
        assert job is not None
        return job

    def get_job(self, job_id: str) -> JobRecord | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return _job(row) if row else None

    def jobs_with_status(self, *statuses: str) -> list[JobRecord]:
        marks = ", ".join("?" * len(statuses))
        with self._lock:
            rows = self._db.execute(f"SELECT * FROM jobs WHERE status IN ({marks}) "
                                    "ORDER BY created", statuses).fetchall()
        return [_job(row) for row in rows]

    def active_job_for(self, request_key: str) -> JobRecord | None:
        """A queued or running job for the same request, if any."""
        with self._lock:
            row = self._db.execute("SELECT * FROM jobs WHERE request_key = ? AND status IN "
                                   "('queued', 'running') ORDER BY created LIMIT 1",
                                   (request_key,)).fetchone()
        return _job(row) if row else None

    def update_job(self, job_id: str, **fields: Any) -> None:
        """Set some of status, progress, schedule_id, error."""
        allowed = {"status", "progress", "schedule_id", "error"}
        assert set(fields) <= allowed, f"unknown job fields {set(fields) - allowed}"
        if "status" in fields:
            assert fields["status"] in JOB_STATUSES
        if "progress" in fields:
            fields["progress"] = json.dumps(fields["progress"])
        columns = ", ".join(f"{name} = ?" for name in fields)
        with self._lock:
            self._db.execute(f"UPDATE jobs SET {columns}, updated = ? WHERE id = ?",
                             (*fields.values(), time.time(), job_id))

    # Leases: a running job belongs to the replica (owner) whose lease on it is current.

    def claim_job(self, job_id: str, owner: str, lease_s: float) -> bool:
        """Move a queued job to running under `owner`'s lease; False if another replica
        (or a cancel) got to it first."""
        now = time.time()
        with self._lock, self._transaction():
            claimed = self._db.execute(
                "UPDATE jobs SET status = 'running', updated = ? WHERE id = ? AND "
                "status = 'queued'", (now, job_id)).rowcount == 1
            if claimed:
                self._db.execute("INSERT OR REPLACE INTO leases VALUES (?, ?, ?, 0)",
                                 (job_id, owner, now + lease_s))
        return claimed

    def renew_lease(self, job_id: str, owner: str, lease_s: float) -> tuple[bool, bool]:
        """(whether `owner` still holds the job, whether a cancel was asked for it)."""
        with self._lock:
            held = self._db.execute("UPDATE leases SET expires = ? WHERE job_id = ? AND "
                                    "owner = ?", (time.time() + lease_s, job_id,
                                                  owner)).rowcount == 1
            row = self._db.execute("SELECT cancel FROM leases WHERE job_id = ?",
                                   (job_id,)).fetchone()
        return held, bool(row and row[0])

    def drop_lease(self, job_id: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM leases WHERE job_id = ?", (job_id,))

    def request_cancel(self, job_id: str) -> bool:
        """Flag a running job for its owner to cancel (seen at its next heartbeat)."""
        with self._lock:
            return self._db.execute("UPDATE leases SET cancel = 1 WHERE job_id = ?",
                                    (job_id,)).rowcount == 1

    def fail_expired(self, error: str) -> list[JobRecord]:
        """Fail, once, each running job whose lease has expired (its replica died); the
        checkpointed schedule (schedule_id) stays with it."""
        now = time.time()
        with self._lock, self._transaction():
            ids = [row[0] for row in self._db.execute(
                "SELECT jobs.id FROM jobs LEFT JOIN leases ON leases.job_id = jobs.id "
                "WHERE jobs.status = 'running' AND (leases.expires IS NULL OR "
                "leases.expires < ?)", (now,)).fetchall()]
            for job_id in ids:
                self._db.execute("UPDATE jobs SET status = 'failed', error = ?, updated = ? "
                                 "WHERE id = ? AND status = 'running'", (error, now, job_id))
                self._db.execute("DELETE FROM leases WHERE job_id = ?", (job_id,))
        return [job for job in map(self.get_job, ids) if job is not None]

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        # BEGIN IMMEDIATE takes the write lock at once: two replicas cannot both claim.
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def count_jobs(self, status: str) -> int:
        with self._lock:
            (count,) = self._db.execute("SELECT COUNT(*) FROM jobs WHERE status = ?",
                                        (status,)).fetchone()
        return int(count)


def _job(row: tuple[Any, ...]) -> JobRecord:
    job_id, status, request, key, progress, schedule_id, error, created, updated = row
    return JobRecord(job_id, status, json.loads(request), key,
                     json.loads(progress) if progress else None, schedule_id, error,
                     created, updated)
