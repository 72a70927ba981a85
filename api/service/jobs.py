"""Jobs: long solves run one process each, so they can report progress and be cancelled.

A job is queued in the store, picked by one of `job_workers` runners, and solved in a
process of its own that reports its incumbent, progress and result over a pipe. The
process is forked from a warm fork server that has imported the solver
(PPSCHED_JOB_START_METHOD=forkserver, `job_context`): starting a job costs milliseconds,
not a new interpreter, while each job keeps its own process to signal or kill. Cancel
sends SIGINT (CP-SAT stops and hands back its best schedule), then SIGKILL after a grace
period (the incumbent is kept).

Jobs survive their replica: the best schedule so far (the heuristic's, then CP-SAT's
improvements, `checkpoint.py`) is checkpointed with the job as it improves; a job whose
replica died (its lease expired) is queued again with a backoff, up to
PPSCHED_JOB_MAX_ATTEMPTS, and its re-run resumes from the checkpoint; on SIGTERM the
replica stops taking work and hands its running jobs back (`stop`). The runners and the
lease keeper are supervised (`supervisor.py`): a store error (the database restarting)
is retried, never the end of a runner.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from ppsched.api.service.config import Settings
from ppsched.api.service.errors import QueueFull
from ppsched.api.service.fair_queue import FairQueue
from ppsched.api.service.job_process import run_job, started
from ppsched.api.service.metrics import Metrics
from ppsched.api.service.quotas import QuotaExceeded, describe, queued_jobs_limit
from ppsched.api.service.request_ids import job_id as job_id_var
from ppsched.api.service.solving import SolveSpec
from ppsched.api.service.store import JobRecord, Store, StoreUnavailable
from ppsched.api.service.supervisor import supervise
from ppsched.api.service.worker import JobResult
from ppsched.solver.solving import ILP

log = logging.getLogger(__name__)
_POLL_S = 0.05
# How long past its time limit a job may run before it is killed as hung (the heuristic,
# the model's build and the re-timing come on top of the search's limit).
_OVERRUN_S = 60.0
# What the fork server imports once, so that every job forked from it starts with them:
# the job's code and the exact search's models (OR-Tools; the solver imports them only
# when an ilp solve asks, which would be every ilp job's first second). PuLP's MILP is
# rare enough to be left to the jobs that ask for it.
JOB_PRELOADED = ("ppsched.api.service.job_process", "ppsched.solver.exact.cpsat",
                 "ppsched.solver.exact.cpsat_policies", "ppsched.solver.exact.multichunk",
                 "ppsched.solver.exact.lns")


def job_context(method: str) -> Any:
    """The multiprocessing context jobs start in (`Settings.job_start_method`).

    A fork server rather than a warm pool of job processes: a job stays one process,
    so SIGINT and SIGKILL reach that job alone (a reused process could take a late
    signal meant for the job before), and a crash loses that job alone. The server
    forks from a clean single-threaded process, never from the service's threads.
    """
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(list(JOB_PRELOADED))
    return context


def warm_up(context: Any) -> None:
    """Start the fork server and let it import `JOB_PRELOADED` (a second or more), by
    running one empty process: called at start-up, in a thread, so that no job's start
    and no event-loop turn pays for it."""
    process = context.Process(target=started, name="ppsched-job-warm-up", daemon=True)
    process.start()
    process.join()


@dataclass
class _Running:
    process: BaseProcess
    conn: Connection
    began: float
    cancel_at: float | None = None
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    handing_back: bool = False
    """The replica is stopping: asked to stop early, the job goes back to the queue."""
    unsaved: JobResult | None = None
    """The best schedule so far when the store did not take it (written at the next
    heartbeat)."""


class JobManager:
    """The job queue and its runners."""

    def __init__(self, settings: Settings, store: Store, metrics: Metrics) -> None:
        self.settings, self.store, self.metrics = settings, store, metrics
        # Fair between owners (tenants, or client addresses in open mode): round-robin.
        self._queue = FairQueue()
        self._running: dict[str, _Running] = {}
        self._runners: list[asyncio.Task[None]] = []
        self._context = job_context(settings.job_start_method)
        # This replica's name on its leases: jobs it runs belong to it while it renews them.
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        # Job ids in this replica's queue: the store's queue is shared, and an id taken
        # from here but not claimed (a store error, a backoff) is queued again by the
        # keeper from the store.
        self._pending: set[str] = set()
        self._stopping = False
        self.restarts: list[int] = []  # one entry per restart of a supervised task

    @property
    def ready(self) -> bool:
        return bool(self._runners) and all(not t.done() for t in self._runners) and \
            not self._stopping

    async def start(self) -> None:
        """Warm the job processes' fork server, recover the store's jobs, then start the
        runners and the lease keeper.

        Only jobs whose lease has expired are failed: a running job of another replica
        on the same store keeps running (its replica renews its lease)."""
        await asyncio.to_thread(warm_up, self._context)
        try:
            self._enqueue_all(self._reap())
            self._update_gauges()
        except StoreUnavailable:  # the keeper picks them up when the database is back
            log.warning("job recovery deferred: the store does not answer")
        self._runners = [supervise(f"job-runner-{i}", self._runner, self.restarts)
                         for i in range(self.settings.job_workers)]
        self._runners.append(supervise("job-lease-keeper", self._keeper, self.restarts))

    def _reap(self) -> list[tuple[str, str]]:
        """Re-queue (or fail, past the attempts) the jobs whose replica died; the queued
        jobs as (id, owner). Store calls only: it runs in a helper thread."""
        requeued = self.store.requeue_expired(self.settings.job_max_attempts,
                                              self.settings.job_retry_backoff_s)
        for job, again in requeued:
            method = job.request.get("method", "?")
            if again:
                log.warning("job %s lost its replica (attempt %d): queued again from its "
                            "best schedule so far (%s)", job.id, job.attempts,
                            job.schedule_id)
            else:
                log.error("job %s lost its replica %d times: failed (best schedule so "
                          "far: %s)", job.id, job.attempts, job.schedule_id)
                self.metrics.solves.labels(method, "failed").inc()
        return [(job.id, job.tenant or "") for job in self.store.jobs_with_status("queued")]

    def _enqueue_all(self, jobs: list[tuple[str, str]]) -> None:
        for job_id, owner in jobs:  # submitted here or through another replica
            if job_id not in self._pending and job_id not in self._running:
                self._enqueue(job_id, owner)

    def _enqueue(self, job_id: str, owner: str) -> None:
        """Queue an id for the runners, in its owner's turn (on the event loop: the
        queue is not thread-safe)."""
        self._pending.add(job_id)
        self._queue.put_nowait(job_id, owner)

    async def _keeper(self) -> None:
        """Every third of a lease (sooner while jobs back off): re-queue jobs whose
        replica died, pick up queued ones. A store error ends one pass, not the keeper."""
        while True:
            await asyncio.sleep(min(self.settings.job_lease_s / 3,
                                    max(self.settings.job_retry_backoff_s, 0.5)))
            try:
                self._enqueue_all(await asyncio.to_thread(self._reap))
            except StoreUnavailable as exc:
                log.warning("lease keeper: %s", exc)

    async def stop(self) -> None:
        """Stop taking work and hand the running jobs back: each is asked to stop early
        (SIGINT: CP-SAT hands back its best schedule), its best is checkpointed and the
        job queued again with its lease released, for another replica (or this one's
        next start) to resume; all within half of PPSCHED_SHUTDOWN_GRACE_S (uvicorn's
        connection drain has the other half), then what still runs is killed and handed
        back as it is."""
        self._stopping = True
        began = time.monotonic()
        for running in list(self._running.values()):
            running.handing_back = True
            pid = running.process.pid
            if running.cancel_at is None and pid is not None and running.process.is_alive():
                os.kill(pid, signal.SIGINT)
        for running in list(self._running.values()):
            left = self.settings.shutdown_grace_s / 2 - (time.monotonic() - began)
            try:
                await asyncio.wait_for(running.finished.wait(), max(left, 0.01))
            except TimeoutError:
                log.error("a job did not stop within the shutdown grace: killed, handed "
                          "back with its last checkpoint")
        for task in self._runners:
            task.cancel()
        for task in self._runners:
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._runners = []

    def submit(self, spec: SolveSpec, owner: str | None = None) -> JobRecord:
        """Queue a job for `spec` owned by `owner` (`tenants.Caller.owner`), or return the
        queued or running one for the same request (a tenant's requests have ids of its
        own, so that job is its own).

        Raises:
            QueueFull: `max_queued_jobs` already wait (429 with Retry-After).
            QuotaExceeded: `owner` has its quota of queued jobs (429 with Retry-After).
        """
        existing = self.store.active_job_for(spec.key)
        if existing is not None:
            return existing
        if self.store.count_jobs("queued") >= self.settings.max_queued_jobs:
            raise QueueFull("the job queue", self.settings.max_queued_jobs, 429,
                            self.settings.retry_after_s)
        if owner is not None:
            limit = queued_jobs_limit(self.settings)
            if self.store.count_queued_of(owner) >= limit:
                raise QuotaExceeded("quota_queued_jobs", limit, describe(owner),
                                    f"more than {limit} jobs queued",
                                    self.settings.retry_after_s)
        job = self.store.add_job(uuid.uuid4().hex, spec.to_dict(), spec.key, owner)
        self._enqueue(job.id, owner or "")
        try:
            self._update_gauges()
        except StoreUnavailable:  # the job is stored: its 202 stands
            pass
        return job

    async def cancel(self, job_id: str) -> None:
        """Cancel a queued or running job; returns once a running one has stopped."""
        job = self.store.get_job(job_id)
        if job is None or job.status in ("done", "failed", "cancelled"):
            return
        running = self._running.get(job_id)
        if running is None and job.status == "running":
            # Another replica runs it: flag it; that replica cancels at its next heartbeat.
            self.store.request_cancel(job_id)
            await self._wait_final(job_id, self.settings.job_lease_s +
                                   self.settings.cancel_grace_s + 5)
            return
        if running is None:
            self.store.update_job(job_id, status="cancelled", error="cancelled while queued")
            self.metrics.solves.labels(job.request.get("method", "?"), "cancelled").inc()
            self._update_gauges()
            return
        if running.cancel_at is None:
            running.cancel_at = time.monotonic()
            pid = running.process.pid
            if pid is not None and running.process.is_alive():
                os.kill(pid, signal.SIGINT)
        try:
            await asyncio.wait_for(running.finished.wait(), self.settings.cancel_grace_s + 5)
        except TimeoutError:
            log.error("job %s did not stop after cancel", job_id)

    async def _wait_final(self, job_id: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            job = self.store.get_job(job_id)
            if job is None or job.status in ("done", "failed", "cancelled"):
                return
            await asyncio.sleep(_POLL_S * 4)
        log.error("job %s did not stop after a cancel through this replica", job_id)

    # Runners.

    async def _runner(self) -> None:
        while not self._stopping:
            job_id = await self._queue.get()
            self._pending.discard(job_id)
            if self._stopping:
                return
            try:
                job = self.store.get_job(job_id)
                # Atomic: of the replicas that queued this id, one claims it (not before
                # its backoff: the keeper queues it again then).
                if job is None or job.status != "queued" or \
                        not self.store.claim_job(job_id, self.owner, self.settings.job_lease_s):
                    continue
            except StoreUnavailable as exc:  # the keeper queues it again from the store
                log.warning("job %s not started: %s", job_id, exc)
                continue
            method = str(job.request.get("method", "?"))
            waited = max(0.0, time.time() - job.created)
            self.metrics.job_wait.labels(method).observe(waited)
            began = time.monotonic()
            job_token = job_id_var.set(job_id)  # the job's id on every log line of its run
            log.info("job started: %s after %.3f s queued", method, waited,
                     extra={"method": method, "waited_s": round(waited, 3)})
            try:
                await self._run(job)
            except asyncio.CancelledError:
                raise
            except StoreUnavailable as exc:
                # Its lease lapses; a replica (this one) queues it again from its
                # checkpoint when the database is back.
                log.error("job %s stopped: %s", job_id, exc)
            except Exception as exc:  # a runner must outlive any one job
                log.exception("job %s failed in its runner", job_id)
                try:
                    self.store.update_job(job_id, status="failed",
                                          error=f"internal error: {exc}")
                except StoreUnavailable:  # the lease lapses: re-queued when it is back
                    pass
            finally:
                ran = time.monotonic() - began
                self.metrics.job_run.labels(method).observe(ran)
                log.info("job ended after %.3f s", ran, extra={"ran_s": round(ran, 3)})
                job_id_var.reset(job_token)
                try:
                    self._update_gauges()
                except StoreUnavailable:
                    pass

    async def _run(self, job: JobRecord) -> None:
        spec = job.request
        parent_conn, child_conn = self._context.Pipe(duplex=False)
        resume = None
        if job.schedule_id and job.best is not None:  # a re-run: from its checkpoint
            body = self.store.get_schedule(job.schedule_id)
            resume = (body, job.best) if body is not None else None
        process = self._context.Process(
            target=run_job, args=(child_conn, spec, job.request_key,
                                   self.settings.cpsat_workers,
                                   self.settings.checkpoint_interval_s, resume,
                                   os.getpid()),
            name=f"ppsched-job-{job.id[:8]}", daemon=True)
        process.start()
        child_conn.close()
        running = _Running(process, parent_conn, time.monotonic())
        self._running[job.id] = running
        self._quietly(self._update_gauges)  # before the try below: must not raise
        renew_at = time.monotonic()
        held = True
        incumbent: JobResult | None = None
        result: tuple[str, Any] | None = None
        # ilp stops at its time limit; the other methods have none of their own, so a
        # big heuristic job may run up to the longest time limit the service accepts.
        budget = float(spec["time_limit_s"]) if spec["method"] == ILP else \
            self.settings.max_time_limit_s
        deadline = running.began + budget + _OVERRUN_S
        try:
            closed = False  # the child closed its end (poll() stays True after EOF)
            while True:
                while not closed and parent_conn.poll():
                    try:
                        kind, payload = parent_conn.recv()
                    except (EOFError, OSError):
                        closed = True
                        break
                    if kind == "incumbent":
                        incumbent = payload
                        running.unsaved = payload
                        self._save(job.id, running)
                    elif kind == "progress":
                        self._quietly(self._progress, job.id, running, payload[1],
                                      payload[2])
                    else:
                        result = (kind, payload)
                if closed or (not process.is_alive() and not parent_conn.poll()):
                    break
                now = time.monotonic()
                if now >= renew_at:  # heartbeat: renew the lease, see remote cancels
                    renew_at = now + self.settings.job_lease_s / 3
                    try:
                        held, cancel = self.store.renew_lease(job.id, self.owner,
                                                              self.settings.job_lease_s)
                    except StoreUnavailable as exc:
                        # The search goes on; the lease is renewed when the database is
                        # back (or, past its expiry, the job is re-queued there).
                        log.warning("job %s: lease not renewed: %s", job.id, exc)
                        held, cancel = True, False
                        renew_at = now + 0.5
                    if held and running.unsaved is not None:
                        self._save(job.id, running)
                    if not held:  # re-queued by another replica: its end is written
                        log.error("job %s lost its lease: stopped", job.id)
                        process.kill()
                        break
                    if cancel and running.cancel_at is None:
                        running.cancel_at = now
                        if process.pid is not None and process.is_alive():
                            os.kill(process.pid, signal.SIGINT)
                if running.cancel_at is not None and \
                        now > running.cancel_at + self.settings.cancel_grace_s:
                    process.kill()
                if now > deadline:
                    log.error("job %s overran its time limit: killed", job.id)
                    process.kill()
                await asyncio.sleep(_POLL_S)
            process.join(timeout=1)
            # A finished solve of another method is its answer: written, not handed back.
            final = result is not None and result[0] == "done" and spec["method"] != ILP
            if held and running.handing_back and running.cancel_at is None and not final:
                self._hand_back(job, running, result)
            elif held:
                await self._write_end(job, running, result, incumbent, process.exitcode)
        finally:
            if process.is_alive():  # the runner itself was cancelled (shutdown)
                process.kill()
                process.join(timeout=1)
                # Handed back at once, not left for its lease to expire: this replica is
                # stopping on purpose. The checkpointed schedule stays with the job.
                self._hand_back(job, running, None)
            parent_conn.close()
            self._running.pop(job.id, None)
            running.finished.set()

    async def _write_end(self, job: JobRecord, running: _Running,
                         result: tuple[str, Any] | None, incumbent: JobResult | None,
                         exitcode: int | None) -> None:
        """Write the job's end, waiting out a database outage (the result is in hand). The
        end is written once: by the lease's holder, which renews it first so no replica
        can take it as expired meanwhile; a lease lost meanwhile (the outage outlasted it)
        leaves the job to the replica that re-queued it."""
        while True:
            try:
                if self.store.renew_lease(job.id, self.owner, self.settings.job_lease_s)[0]:
                    self._finish(job, running, result, incumbent, exitcode)
                    self.store.drop_lease(job.id)
                else:
                    log.error("job %s lost its lease before its end was written", job.id)
                return
            except StoreUnavailable as exc:
                log.warning("job %s: end not written yet: %s", job.id, exc)
                await asyncio.sleep(0.5)

    def _hand_back(self, job: JobRecord, running: _Running,
                   result: tuple[str, Any] | None) -> None:
        """The replica is stopping: checkpoint what the job handed back (its best, when
        asked to stop early), then queue it again for a replica to resume."""
        if result is not None and result[0] == "done":
            running.unsaved = result[1]
        try:
            if running.unsaved is not None:
                self._save(job.id, running)
            if self.store.release_job(job.id, self.owner):
                log.warning("job %s handed back to the queue (best so far: %s)", job.id,
                            running.unsaved[4] if running.unsaved else None)
        except StoreUnavailable as exc:  # its lease lapses: re-queued when it is back
            log.error("job %s not handed back: %s", job.id, exc)

    def _finish(self, job: JobRecord, running: _Running, result: tuple[str, Any] | None,
                incumbent: JobResult | None, exitcode: int | None) -> None:
        method = job.request.get("method", "?")
        cancelled = running.cancel_at is not None
        if result is not None and result[0] == "done":
            done: JobResult = result[1]
            if cancelled:
                # The best so far answers no request: stored under its own content id.
                self._keep(job.id, done, "cancelled", cache=False)
            else:
                self._keep(job.id, done, "done", cache=True)
            self.metrics.solves.labels(method, "cancelled" if cancelled else done[3]).inc()
            return
        if cancelled:
            if incumbent is not None:
                self._keep(job.id, incumbent, "cancelled", cache=False)
            else:
                self.store.update_job(job.id, status="cancelled",
                                      error="cancelled before a schedule was found")
            self.metrics.solves.labels(method, "cancelled").inc()
            return
        if result is not None:  # ("error", message): the solver refused the input
            error = result[1]
        else:
            error = f"worker lost: its process exited with code {exitcode} before " \
                    "reporting a result"
        self.store.update_job(job.id, status="failed", error=error)
        self.metrics.solves.labels(method, "failed").inc()

    def _keep(self, job_id: str, done: JobResult, status: str, *, cache: bool) -> None:
        job = self.store.get_job(job_id)
        assert job is not None
        keyed_body, cid, cid_body = done[:3]
        schedule_id, body = (job.request_key, keyed_body) if cache else (cid, cid_body)
        self.store.put_schedule(schedule_id, body)
        self.store.update_job(job_id, status=status, schedule_id=schedule_id)

    def _save(self, job_id: str, running: _Running) -> None:
        """Checkpoint the job's best schedule so far (`running.unsaved`), so that a crash
        of this replica leaves it behind for the re-run; kept for the next heartbeat if
        the store does not answer."""
        incumbent = running.unsaved
        if incumbent is None:
            return
        try:
            self._checkpoint(job_id, incumbent)
            self._progress(job_id, running, incumbent[4], incumbent[5])
        except StoreUnavailable as exc:
            log.warning("job %s: checkpoint deferred: %s", job_id, exc)
            return
        running.unsaved = None

    def _checkpoint(self, job_id: str, incumbent: JobResult) -> None:
        """Keep `incumbent` as the running job's checkpoint if it beats the stored one."""
        _, cid, cid_body, _, objective, _ = incumbent
        if objective is None:
            return
        job = self.store.get_job(job_id)
        if job is not None and job.best is not None and job.best <= objective:
            return  # a resumed job's own checkpoint, or no better
        self.store.put_schedule(cid, cid_body)
        self.store.checkpoint(job_id, self.owner, cid, objective)

    def _quietly(self, write: Any, *args: Any) -> None:
        """A progress or gauge write: skipped while the store does not answer."""
        try:
            write(*args)
        except StoreUnavailable:
            pass

    def _progress(self, job_id: str, running: _Running, best: float | None,
                  bound: float | None = None) -> None:
        job = self.store.get_job(job_id)
        previous = job.progress if job and job.progress else {}
        bound = bound if bound is not None else previous.get("bound")
        gap = (best - bound) / best if best and bound is not None and best > 0 else None
        self.store.update_job(job_id, progress={
            "elapsed_s": round(time.monotonic() - running.began, 3), "best": best,
            "bound": bound, "gap": gap})

    def _update_gauges(self) -> None:
        self.metrics.queue_depth.labels("jobs").set(self.store.count_jobs("queued"))
        self.metrics.in_progress.labels("jobs").set(len(self._running))
