"""Jobs: long solves run one process each, so they can report progress and be cancelled.

A job is queued in the store, picked by one of `job_workers` runners, and solved in a
fresh worker process that reports its incumbent, progress and result over a pipe. Cancel
sends SIGINT (CP-SAT stops and hands back its best schedule), then SIGKILL after a grace
period (the incumbent is kept). On start, a job that was running when the service
stopped is failed with that reason, and queued jobs are queued again.
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
from ppsched.api.service.metrics import Metrics
from ppsched.api.service.quotas import QuotaExceeded, describe, queued_jobs_limit
from ppsched.api.service.request_ids import job_id as job_id_var
from ppsched.api.service.solving import SolveSpec
from ppsched.api.service.store import JobRecord, Store
from ppsched.api.service.worker import JobResult, run_job
from ppsched.solver.solving import ILP

log = logging.getLogger(__name__)
_POLL_S = 0.05
# How long past its time limit a job may run before it is killed as hung (the heuristic,
# the model's build and the re-timing come on top of the search's limit).
_OVERRUN_S = 60.0


@dataclass
class _Running:
    process: BaseProcess
    conn: Connection
    began: float
    cancel_at: float | None = None
    finished: asyncio.Event = field(default_factory=asyncio.Event)


class JobManager:
    """The job queue and its runners."""

    def __init__(self, settings: Settings, store: Store, metrics: Metrics) -> None:
        self.settings, self.store, self.metrics = settings, store, metrics
        # Fair between owners (tenants, or client addresses in open mode): round-robin.
        self._queue = FairQueue()
        self._running: dict[str, _Running] = {}
        self._runners: list[asyncio.Task[None]] = []
        self._context = multiprocessing.get_context("spawn")
        # This replica's name on its leases: jobs it runs belong to it while it renews them.
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._seen: set[str] = set()  # job ids queued here (the store's queue is shared)

    @property
    def ready(self) -> bool:
        return bool(self._runners) and all(not t.done() for t in self._runners)

    async def start(self) -> None:
        """Recover the store's jobs, then start the runners and the lease keeper.

        Only jobs whose lease has expired are failed: a running job of another replica
        on the same store keeps running (its replica renews its lease)."""
        self._reap_and_enqueue()
        self._update_gauges()
        self._runners = [asyncio.create_task(self._runner(), name=f"job-runner-{i}")
                         for i in range(self.settings.job_workers)]
        self._runners.append(asyncio.create_task(self._keeper(), name="job-lease-keeper"))

    def _reap_and_enqueue(self) -> None:
        for job in self.store.fail_expired("worker lost: the service running the job "
                                           "stopped (its lease expired); submit it again"):
            log.warning("job %s lost its replica: failed (best schedule so far: %s)",
                        job.id, job.schedule_id)
            self.metrics.solves.labels(job.request.get("method", "?"), "failed").inc()
        for job in self.store.jobs_with_status("queued"):
            if job.id not in self._seen:  # submitted here or through another replica
                self._seen.add(job.id)
                self._queue.put_nowait(job.id, job.tenant or "")

    async def _keeper(self) -> None:
        """Every third of a lease: fail jobs whose replica died, pick up queued ones."""
        while True:
            await asyncio.sleep(self.settings.job_lease_s / 3)
            try:
                await asyncio.to_thread(self._reap_and_enqueue)
            except Exception:  # a store hiccup must not end the keeper
                log.exception("lease keeper")

    async def stop(self) -> None:
        """Stop the runners; running jobs' processes are killed and the jobs failed."""
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
        self._seen.add(job.id)
        self._queue.put_nowait(job.id, owner or "")
        self._update_gauges()
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
        while True:
            job_id = await self._queue.get()
            job = self.store.get_job(job_id)
            if job is None or job.status != "queued":
                continue
            # Atomic: of the replicas that queued this id, one claims it.
            if not self.store.claim_job(job_id, self.owner, self.settings.job_lease_s):
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
            except Exception as exc:  # a runner must outlive any one job
                log.exception("job %s failed in its runner", job_id)
                self.store.update_job(job_id, status="failed", error=f"internal error: {exc}")
            finally:
                ran = time.monotonic() - began
                self.metrics.job_run.labels(method).observe(ran)
                log.info("job ended after %.3f s", ran, extra={"ran_s": round(ran, 3)})
                job_id_var.reset(job_token)
                self._update_gauges()

    async def _run(self, job: JobRecord) -> None:
        spec = job.request
        parent_conn, child_conn = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=run_job, args=(child_conn, spec, job.request_key,
                                   self.settings.cpsat_workers),
            name=f"ppsched-job-{job.id[:8]}", daemon=True)
        process.start()
        child_conn.close()
        running = _Running(process, parent_conn, time.monotonic())
        self._running[job.id] = running
        self._update_gauges()
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
                        self._checkpoint(job.id, payload)
                        self._progress(job.id, running, payload[4], payload[5])
                    elif kind == "progress":
                        self._progress(job.id, running, payload[1], payload[2])
                    else:
                        result = (kind, payload)
                if closed or (not process.is_alive() and not parent_conn.poll()):
                    break
                now = time.monotonic()
                if now >= renew_at:  # heartbeat: renew the lease, see remote cancels
                    renew_at = now + self.settings.job_lease_s / 3
                    held, cancel = self.store.renew_lease(job.id, self.owner,
                                                          self.settings.job_lease_s)
                    if not held:  # failed by another replica: its end is written
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
            # The end is written once: by the lease's holder, which renews it first so
            # no replica can take it as expired meanwhile.
            if held and self.store.renew_lease(job.id, self.owner,
                                               self.settings.job_lease_s)[0]:
                self._finish(job, running, result, incumbent, process.exitcode)
                self.store.drop_lease(job.id)
        finally:
            if process.is_alive():  # the runner itself was cancelled (shutdown)
                process.kill()
                process.join(timeout=1)
                # Failed at once, not left for its lease to expire: this replica is
                # stopping on purpose. The checkpointed schedule stays with the job.
                if self.store.renew_lease(job.id, self.owner, self.settings.job_lease_s)[0]:
                    self.store.update_job(job.id, status="failed", error="worker lost: the "
                                          "service stopped while the job was running")
                    self.store.drop_lease(job.id)
            parent_conn.close()
            self._running.pop(job.id, None)
            running.finished.set()

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

    def _checkpoint(self, job_id: str, incumbent: JobResult) -> None:
        """Keep the best schedule so far with the running job, so that a crash of this
        replica leaves it behind (the job fails with its schedule_id)."""
        _, cid, cid_body = incumbent[:3]
        self.store.put_schedule(cid, cid_body)
        self.store.update_job(job_id, schedule_id=cid)

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
