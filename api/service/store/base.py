"""The store's common part: the SQL over schedules, jobs and leases, written once in the
dialect SQLite and PostgreSQL share (`?` placeholders, `ON CONFLICT ... DO UPDATE`), and
the session that runs it under one connection's lock. A back end (`sqlite.py`,
`postgres.py`) supplies the connection: how a statement runs and how a transaction opens.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

JOB_STATUSES = ("queued", "running", "done", "failed", "cancelled")
FINAL_STATUSES = ("done", "failed", "cancelled")
# `ends` counts the writes of a final status: the lease protocol keeps it at 1 (the
# two-replica tests read it to prove that no job ends twice).
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS schedules (id TEXT PRIMARY KEY, body TEXT NOT NULL, "
    "created DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, status TEXT NOT NULL, "
    "request TEXT NOT NULL, request_key TEXT NOT NULL, progress TEXT, schedule_id TEXT, "
    "error TEXT, created DOUBLE PRECISION NOT NULL, updated DOUBLE PRECISION NOT NULL, "
    "ends INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX IF NOT EXISTS jobs_by_status ON jobs (status, created)",
    "CREATE INDEX IF NOT EXISTS schedules_by_age ON schedules (created)",
    "CREATE TABLE IF NOT EXISTS leases (job_id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
    "expires DOUBLE PRECISION NOT NULL, cancel INTEGER NOT NULL DEFAULT 0)",
)
_JOB_COLUMNS = ("id, status, request, request_key, progress, schedule_id, error, created, "
                "updated, attempts, best, tenant")
# Columns added after the first release: a store written by an older version gets them
# when it opens (each back end's migration). attempts: how many times the job's replica
# was lost; not_before: the earliest time (epoch s) a re-queued job may run again (its
# backoff); best: the objective of its checkpointed schedule (`schedule_id`), None when
# none; tenant: the job's owner, a tenant's name or ``client:ADDRESS`` in open mode (NULL
# for a job of a store written before tenants).
ADDED_COLUMNS = (("ends", "INTEGER NOT NULL DEFAULT 0"),
                 ("attempts", "INTEGER NOT NULL DEFAULT 0"),
                 ("not_before", "DOUBLE PRECISION NOT NULL DEFAULT 0"),
                 ("best", "DOUBLE PRECISION"),
                 ("tenant", "TEXT"))
# Serves the per-owner counts and lists (created after the tenant column exists).
TENANT_INDEX = "CREATE INDEX IF NOT EXISTS jobs_by_tenant ON jobs (tenant, status, created)"

Run = Callable[[str, Sequence[Any]], tuple[list[tuple[Any, ...]], int]]
"""Runs one statement: (its rows, its row count)."""


class StoreSettingError(ValueError):
    """A store setting that cannot be used (an unknown database URL scheme)."""


class StoreUnavailable(RuntimeError):
    """The database does not answer now (stopped, restarting, unreachable, its pool
    exhausted): 503 with Retry-After, never a 500; callers that run on their own (the job
    runners, the lease keeper) retry later. The message names the store, never a password."""


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
    tenant: str | None = None
    """Its owner: a tenant, or ``client:ADDRESS`` in open mode (`tenants.Caller.owner`)."""
    attempts: int = 0
    """Times the job's replica was lost and the job re-queued."""
    best: float | None = None
    """The objective of the checkpointed schedule (`schedule_id`), None when none."""


class Store:
    """Schedules, jobs and leases over a back end's connection `_db`, one session at a
    time under `_lock` (each call is a few milliseconds, made from the event loop's thread
    or a helper thread). A back end may replace `_session` (PostgreSQL checks sessions
    out of a connection pool). A call raises `StoreUnavailable` when the database does
    not answer."""

    description = "store"
    _db: Any
    _lock: threading.Lock

    @property
    def shared_path(self) -> str | None:
        """A file another process may open to write this store itself (`SqliteStore`'s
        file), None where it cannot (an in-memory database; PostgreSQL, whose pool and
        outage handling stay in the service)."""
        return None

    def _execute(self, sql: str, params: Sequence[Any]) -> tuple[list[tuple[Any, ...]], int]:
        """Run one statement of the shared SQL on `_db`: (its rows, its row count)."""
        raise NotImplementedError

    def _transaction(self) -> AbstractContextManager[object]:
        """A transaction on `_db`: committed when the block ends, rolled back if it raises."""
        raise NotImplementedError

    def _check_connection(self) -> None:
        """Called under the lock before each session (a back end may reconnect here)."""

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _session(self, transaction: bool = False) -> Iterator[Run]:
        with self._lock:
            self._check_connection()
            if not transaction:
                yield self._execute
                return
            with self._transaction():
                yield self._execute

    def _one(self, sql: str, params: Sequence[Any] = ()) -> tuple[list[tuple[Any, ...]], int]:
        with self._session() as run:
            return run(sql, params)

    def ping(self) -> bool:
        return self._one("SELECT 1")[0] == [(1,)]

    # Schedules.

    def get_schedule(self, schedule_id: str) -> str | None:
        rows, _ = self._one("SELECT body FROM schedules WHERE id = ?", (schedule_id,))
        return str(rows[0][0]) if rows else None

    def put_schedule(self, schedule_id: str, body: str) -> None:
        self._one("INSERT INTO schedules VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                  "body = excluded.body, created = excluded.created",
                  (schedule_id, body, time.time()))

    # Jobs.

    def add_job(self, job_id: str, request: dict[str, Any], request_key: str,
                tenant: str | None = None) -> JobRecord:
        now = time.time()
        self._one(f"INSERT INTO jobs ({_JOB_COLUMNS}) VALUES (?, 'queued', ?, ?, NULL, NULL, "
                  "NULL, ?, ?, 0, NULL, ?)", (job_id, json.dumps(request), request_key, now,
                                             now, tenant))
        job = self.get_job(job_id)
        assert job is not None
        return job

    def get_job(self, job_id: str) -> JobRecord | None:
        rows, _ = self._one(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,))
        return _job(rows[0]) if rows else None

    def jobs_with_status(self, *statuses: str) -> list[JobRecord]:
        marks = ", ".join("?" * len(statuses))
        rows, _ = self._one(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE status IN ({marks}) "
                            "ORDER BY created", statuses)
        return [_job(row) for row in rows]

    def active_job_for(self, request_key: str) -> JobRecord | None:
        """A queued or running job for the same request, if any."""
        rows, _ = self._one(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE request_key = ? AND "
                            "status IN ('queued', 'running') ORDER BY created LIMIT 1",
                            (request_key,))
        return _job(rows[0]) if rows else None

    def update_job(self, job_id: str, **fields: Any) -> None:
        """Set some of status, progress, schedule_id, error."""
        allowed = {"status", "progress", "schedule_id", "error"}
        assert set(fields) <= allowed, f"unknown job fields {set(fields) - allowed}"
        ends = ""
        if "status" in fields:
            assert fields["status"] in JOB_STATUSES
            ends = ", ends = ends + 1" if fields["status"] in FINAL_STATUSES else ""
        if "progress" in fields:
            fields["progress"] = json.dumps(fields["progress"])
        columns = ", ".join(f"{name} = ?" for name in fields)
        self._one(f"UPDATE jobs SET {columns}, updated = ?{ends} WHERE id = ?",
                  (*fields.values(), time.time(), job_id))

    def count_jobs(self, status: str) -> int:
        rows, _ = self._one("SELECT COUNT(*) FROM jobs WHERE status = ?", (status,))
        return int(rows[0][0])

    def count_queued_of(self, tenant: str) -> int:
        """Queued jobs of one owner (its quota of queued jobs)."""
        rows, _ = self._one("SELECT COUNT(*) FROM jobs WHERE tenant = ? AND status = "
                            "'queued'", (tenant,))
        return int(rows[0][0])

    def jobs_of(self, tenant: str | None, statuses: Sequence[str] = JOB_STATUSES,
                limit: int = 100) -> list[JobRecord]:
        """The newest jobs of one owner (None: of everyone, open mode), newest first."""
        marks = ", ".join("?" * len(statuses))
        owned = "tenant = ? AND " if tenant is not None else ""
        params = (*([tenant] if tenant is not None else []), *statuses, limit)
        rows, _ = self._one(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE {owned}status IN "
                            f"({marks}) ORDER BY created DESC, id LIMIT ?", params)
        return [_job(row) for row in rows]

    # Leases: a running job belongs to the replica (owner) whose lease on it is current.

    def claim_job(self, job_id: str, owner: str, lease_s: float) -> bool:
        """Move a queued job to running under `owner`'s lease; False if another replica
        (or a cancel) got to it first (the conditional update is the atomic step)."""
        now = time.time()
        with self._session(transaction=True) as run:
            claimed = run("UPDATE jobs SET status = 'running', updated = ? WHERE id = ? AND "
                          "status = 'queued' AND not_before <= ?", (now, job_id, now))[1] == 1
            if claimed:
                run("INSERT INTO leases VALUES (?, ?, ?, 0) ON CONFLICT (job_id) DO UPDATE "
                    "SET owner = excluded.owner, expires = excluded.expires, cancel = 0",
                    (job_id, owner, now + lease_s))
        return claimed

    def renew_lease(self, job_id: str, owner: str, lease_s: float) -> tuple[bool, bool]:
        """(whether `owner` still holds the job, whether a cancel was asked for it)."""
        with self._session(transaction=True) as run:
            held = run("UPDATE leases SET expires = ? WHERE job_id = ? AND owner = ?",
                       (time.time() + lease_s, job_id, owner))[1] == 1
            rows, _ = run("SELECT cancel FROM leases WHERE job_id = ?", (job_id,))
        return held, bool(rows and rows[0][0])

    def drop_lease(self, job_id: str) -> None:
        self._one("DELETE FROM leases WHERE job_id = ?", (job_id,))

    def request_cancel(self, job_id: str) -> bool:
        """Flag a running job for its owner to cancel (seen at its next heartbeat)."""
        return self._one("UPDATE leases SET cancel = 1 WHERE job_id = ?", (job_id,))[1] == 1

    def checkpoint(self, job_id: str, owner: str, schedule_id: str, best: float) -> bool:
        """Keep `schedule_id` (objective `best`, its body already stored) as the running
        job's best so far, if `owner` still holds it and it beats the stored one; whether
        it was kept."""
        return self._one("UPDATE jobs SET schedule_id = ?, best = ?, updated = ? WHERE id = ? "
                         "AND status = 'running' AND (best IS NULL OR best > ?) AND EXISTS "
                         "(SELECT 1 FROM leases WHERE job_id = ? AND owner = ?)",
                         (schedule_id, best, time.time(), job_id, best, job_id, owner))[1] == 1

    def release_job(self, job_id: str, owner: str) -> bool:
        """Hand a running job back to the queue (its replica is shutting down): queued
        again at once with its checkpoint, its lease dropped; not counted as an attempt.
        False if `owner` no longer held it."""
        now = time.time()
        with self._session(transaction=True) as run:
            if run("DELETE FROM leases WHERE job_id = ? AND owner = ?", (job_id, owner))[1] != 1:
                return False
            return run("UPDATE jobs SET status = 'queued', not_before = ?, updated = ? WHERE "
                       "id = ? AND status = 'running'", (now, now, job_id))[1] == 1

    def requeue_expired(self, max_attempts: int, backoff_s: float,
                        ) -> list[tuple[JobRecord, bool]]:
        """Each running job whose lease has expired (its replica died), once: queued again
        with its checkpoint after a backoff of `backoff_s` * 2 ** attempts, or failed with
        the reason once it has been lost `max_attempts` times. Returns (the job, whether
        it was re-queued).

        The lease's deletion, conditional on its expiry, is the atomic step: a renewal
        racing with it either comes first (the delete then matches nothing) or finds no
        lease (its owner stops); of two replicas reaping at once, one deletes."""
        now = time.time()
        done: list[tuple[str, bool]] = []
        candidates, _ = self._one(
            "SELECT jobs.id, leases.job_id, jobs.attempts FROM jobs LEFT JOIN leases ON "
            "leases.job_id = jobs.id WHERE jobs.status = 'running' AND (leases.expires IS "
            "NULL OR leases.expires < ?)", (now,))
        for job_id, leased, attempts in candidates:
            attempts = int(attempts or 0) + 1
            with self._session(transaction=True) as run:
                if leased is not None and run("DELETE FROM leases WHERE job_id = ? AND "
                                              "expires < ?", (job_id, now))[1] != 1:
                    continue  # renewed meanwhile, or reaped by another replica
                unleased = "id = ? AND status = 'running' AND NOT EXISTS (SELECT 1 FROM " \
                           "leases WHERE job_id = ?)"
                if attempts < max_attempts:
                    changed = run(f"UPDATE jobs SET status = 'queued', attempts = ?, "
                                  f"not_before = ?, updated = ? WHERE {unleased}",
                                  (attempts, now + backoff_s * 2 ** (attempts - 1), now,
                                   job_id, job_id))[1]
                else:
                    error = (f"worker lost {attempts} times (the replica running it died "
                             f"and its lease expired; at most {max_attempts} attempts, "
                             "PPSCHED_JOB_MAX_ATTEMPTS); the best schedule so far is kept")
                    changed = run(f"UPDATE jobs SET status = 'failed', attempts = ?, error = "
                                  f"?, updated = ?, ends = ends + 1 WHERE {unleased}",
                                  (attempts, error, now, job_id, job_id))[1]
                if changed == 1:
                    done.append((job_id, attempts < max_attempts))
        jobs = [(self.get_job(job_id), requeued) for job_id, requeued in done]
        return [(job, requeued) for job, requeued in jobs if job is not None]

    # Retention.

    def prune(self, max_age_s: float, max_bytes: int) -> int:
        """Delete stored schedules and views older than `max_age_s`, then the oldest
        until their bodies total at most `max_bytes`, and finished jobs older than
        `max_age_s`; a queued or running job's checkpoint is kept. Returns the number of
        schedules and views deleted."""
        cutoff = time.time() - max_age_s
        active = ("id NOT IN (SELECT schedule_id FROM jobs WHERE schedule_id IS NOT NULL "
                  "AND status IN ('queued', 'running'))")
        removed = self._one(f"DELETE FROM schedules WHERE created < ? AND {active}",
                            (cutoff,))[1]
        self._one("DELETE FROM jobs WHERE status IN ('done', 'failed', 'cancelled') AND "
                  "updated < ?", (cutoff,))
        rows, _ = self._one(f"SELECT id, LENGTH(body) FROM schedules WHERE {active} "
                            "ORDER BY created DESC, id")
        total, over = 0, []
        for schedule_id, size in rows:
            total += int(size)
            if total > max_bytes:
                over.append(schedule_id)
        for start in range(0, len(over), 500):
            batch = over[start:start + 500]
            marks = ", ".join("?" * len(batch))
            removed += self._one(f"DELETE FROM schedules WHERE id IN ({marks})", batch)[1]
        return max(removed, 0)


def _job(row: Sequence[Any]) -> JobRecord:
    job_id, status, request, key, progress, schedule_id, error, created, updated = row[:9]
    attempts, best = row[9:11]
    return JobRecord(job_id, status, json.loads(request), key,
                     json.loads(progress) if progress else None, schedule_id, error,
                     float(created), float(updated), tenant=row[11] if len(row) > 11 else None,
                     attempts=int(attempts or 0), best=None if best is None else float(best))
