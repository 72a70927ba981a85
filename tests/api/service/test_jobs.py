"""Jobs against real server processes: the life cycle, cancel with the best schedule
kept, a worker that dies, and recovery after the service itself is killed."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from ppsched.solver.model.schedule import parse_schedule

from tests.api.service.conftest import EASY, HARD, Server, wait_for_job


def profile_with(**changes: Any) -> dict[str, Any]:
    return {**EASY, **changes}


def test_long_ilp_request_becomes_a_job_that_finishes(server: Server) -> None:
    # The module server's synchronous ceiling is 3 s.
    request = {"profile": EASY, "method": "ilp", "time_limit_s": 20.0}
    response = server.client.post("/v1/schedules", json=request)
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert accepted["status"] == "queued"
    assert response.headers["location"] == f"/v1/jobs/{accepted['id']}"
    assert accepted["links"] == {"self": response.headers["location"]}
    job = wait_for_job(server.client, accepted["id"], ("done", "failed"))
    assert job["status"] == "done" and job["error"] is None
    assert job["progress"]["best"] == job["progress"]["bound"] == 24.0
    result = server.client.get(f"/v1/schedules/{job['schedule_id']}").json()
    assert result["solver"]["status"] == "optimal" and result["metrics"]["cost"] == 24.0
    # Content-addressed: the same request is now answered at once from the store.
    again = server.client.post("/v1/schedules", json=request)
    assert again.status_code == 200 and again.json()["id"] == job["schedule_id"]


def test_request_over_the_sync_op_budget_becomes_a_job(start_server: Any) -> None:
    # EASY is 3 * 4 * 8 = 96 ops: over a budget of 50 it is a job, whatever the method.
    server = start_server(max_sync_ops=50)
    response = server.client.post("/v1/schedules", json={"profile": EASY, "method": "zb-h1"})
    assert response.status_code == 202, response.text
    job = wait_for_job(server.client, response.json()["id"], ("done", "failed"))
    assert job["status"] == "done", job
    schedule = parse_schedule(server.client.get(job["links"]["schedule"]).json())
    assert schedule.method == "zb-h1"
    small = profile_with(num_microbatches=4)  # 48 ops on one chunk: answered at once
    assert server.client.post("/v1/schedules", json={"profile": small, "layouts": "1"}
                              ).status_code == 200


def test_post_jobs_takes_any_method(server: Server) -> None:
    response = server.client.post("/v1/jobs", json={"profile": EASY, "method": "gpipe"})
    assert response.status_code == 202
    job = wait_for_job(server.client, response.json()["id"], ("done",))
    schedule = server.client.get(job["links"]["schedule"]).json()
    assert schedule["method"] == "gpipe" and job["progress"] is None


def test_cancel_keeps_the_best_schedule_so_far(server: Server) -> None:
    request = {"profile": HARD, "method": "ilp", "time_limit_s": 120.0}
    job_id = server.client.post("/v1/jobs", json=request).json()["id"]
    running = wait_for_job(server.client, job_id, ("running",), has_progress=True)
    assert running["progress"]["best"] > running["progress"]["bound"] > 0
    # The same request while it runs is the same job.
    assert server.client.post("/v1/schedules", json=request).json()["id"] == job_id
    began = time.monotonic()
    cancelled = server.client.delete(f"/v1/jobs/{job_id}").json()
    assert time.monotonic() - began < 15
    assert cancelled["status"] == "cancelled" and cancelled["schedule_id"]
    best = parse_schedule(server.client.get(f"/v1/schedules/{cancelled['schedule_id']}")
                          .json())
    assert best.solver is not None and best.metrics is not None
    assert max(best.metrics.peak_memory) <= 6.0
    assert best.metrics.cost <= running["progress"]["best"] + 1e-6
    # A cancelled search does not answer the request: asking again starts a new job.
    again = server.client.post("/v1/schedules", json=request)
    assert again.status_code == 202 and again.json()["id"] != job_id
    assert server.client.delete(f"/v1/jobs/{again.json()['id']}").json()["status"] == \
        "cancelled"
    # Cancelling a finished job changes nothing.
    assert server.client.delete(f"/v1/jobs/{job_id}").json() == cancelled


def test_a_killed_worker_fails_its_job_and_a_restart_reruns_the_running_one(
        start_server: Any) -> None:
    first = start_server(workers=1, job_lease_s=3)
    kept = first.client.post("/v1/schedules", json={"profile": EASY}).json()
    pool = set(first.children())  # the solver pool's worker, started by that solve
    request: dict[str, Any] = {"profile": HARD, "method": "ilp", "time_limit_s": 120.0}
    job_id = first.client.post("/v1/jobs", json=request).json()["id"]
    wait_for_job(first.client, job_id, ("running",), has_progress=True)
    job_pids = [pid for pid in first.children() if pid not in pool]
    assert len(job_pids) == 1
    os.kill(job_pids[0], signal.SIGKILL)
    failed = wait_for_job(first.client, job_id, ("failed",), timeout_s=10)
    assert "worker lost" in failed["error"] and "-9" in failed["error"]

    # Now the service itself dies while a job runs; a new one on the same store...
    second_request = {**request, "time_limit_s": 119.0}
    running_id = first.client.post("/v1/jobs", json=second_request).json()["id"]
    checkpointed = wait_for_job(first.client, running_id, ("running",), has_progress=True)
    assert checkpointed["schedule_id"]  # the heuristic's schedule, kept while it runs
    queued_id = first.client.post("/v1/jobs", json={"profile": EASY, "method": "1f1b"}
                                  ).json()["id"]
    orphans = first.children()  # the job's process and the pool's
    first.stop(kill=True)
    second = start_server(workers=1, job_lease_s=3)
    # Queued again once its lease expires (not at start-up: it might be another live
    # replica's), and re-run from its best schedule so far (issue 29: it used to be
    # failed with "lease expired; submit it again").
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rerun = second.client.get(f"/v1/jobs/{running_id}").json()
        if rerun["attempts"] == 1 and rerun["status"] == "running" and rerun["progress"]:
            break
        time.sleep(0.1)
    assert rerun["attempts"] == 1 and rerun["status"] == "running", rerun
    best = second.client.get(f"/v1/schedules/{checkpointed['schedule_id']}").json()
    assert parse_schedule(best).profile.num_ranks == HARD["num_ranks"]
    ended = second.client.delete(f"/v1/jobs/{running_id}").json()
    assert ended["status"] == "cancelled" and ended["schedule_id"]
    rerun_best = parse_schedule(
        second.client.get(f"/v1/schedules/{ended['schedule_id']}").json())
    assert rerun_best.solver is not None and parse_schedule(best).solver is not None
    assert rerun_best.solver.objective <= parse_schedule(best).solver.objective + 1e-9
    # ...runs what was queued, keeps the results, and the old job process is gone.
    assert wait_for_job(second.client, queued_id, ("done",))["schedule_id"]
    again = second.client.post("/v1/schedules", json={"profile": EASY})
    assert again.headers["x-cache"] == "hit" and again.json() == kept
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in orphans) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in orphans)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_two_replicas_share_jobs_and_cancel_through_either(start_server: Any) -> None:
    first = start_server(job_lease_s=3)
    request: dict[str, Any] = {"profile": HARD, "method": "ilp", "time_limit_s": 120.0}
    job_id = first.client.post("/v1/jobs", json=request).json()["id"]
    wait_for_job(first.client, job_id, ("running",), has_progress=True)
    # A second replica on the same store: its start-up failed the first's running job.
    second = start_server(job_lease_s=3)
    assert second.client.get(f"/v1/jobs/{job_id}").json()["status"] == "running"
    # A cancel through the replica that does not run it stops it, with its best schedule.
    cancelled = second.client.delete(f"/v1/jobs/{job_id}").json()
    assert cancelled["status"] == "cancelled", cancelled
    assert cancelled["schedule_id"] and cancelled["error"] is None
    assert first.client.get(f"/v1/jobs/{job_id}").json() == cancelled
    # A job submitted through one replica runs exactly once, on one of them.
    quick = first.client.post("/v1/jobs", json={"profile": EASY, "method": "zb-h1"}).json()
    done = wait_for_job(second.client, quick["id"], ("done", "failed"))
    assert done["status"] == "done" and done["error"] is None


def test_the_op_budget_counts_the_default_v_cut(start_server: Any) -> None:
    # HARD is 3 * 8 * 24 = 576 ops as it is; by default the heuristic also tries the V
    # and loop2 cuts (1,152 more each), so it is 2,880 ops: over a budget of 1,000, a job,
    # at any memory limit (issue 27: the layouts are considered at every level).
    server = start_server(max_sync_ops=1000)
    heuristic = server.client.post("/v1/schedules", json={"profile": HARD})
    assert heuristic.status_code == 202, heuristic.text
    free = server.client.post("/v1/schedules", json={"profile": {**HARD, "memory_limit": None}})
    assert free.status_code == 202, free.text
    # One chunk alone: 576 ops, answered at once.
    one = server.client.post("/v1/schedules", json={"profile": HARD, "layouts": "1"})
    assert one.status_code == 200, one.text
    done = wait_for_job(server.client, heuristic.json()["id"], ("done", "failed"))
    assert done["status"] == "done", done


def test_jobs_fork_from_the_warm_fork_server_or_spawn_as_set(start_server: Any) -> None:
    # The default: the fork server is started and has imported the job's code before the
    # service says it is ready, so no job pays for a new interpreter (issue 29).
    forked = start_server(workers=1)
    servers = forked.fork_servers()
    assert len(servers) == 1
    maps = Path(f"/proc/{servers[0]}/maps").read_text()  # the solver's native code is loaded
    assert "ortools" in maps
    done = [forked.client.post("/v1/jobs", json={"profile": {**EASY, "memory_limit": limit},
                                                  "method": "1f1b"}).json()["id"]
            for limit in (8.0, 9.0, 10.0)]
    for job_id in done:
        assert wait_for_job(forked.client, job_id, ("done",))["schedule_id"]
    assert forked.fork_servers() == servers  # one server for every job
    # PPSCHED_JOB_START_METHOD=spawn: a fresh interpreter per job, and no fork server.
    spawned = start_server("spawn.sqlite3", workers=1, job_start_method="spawn")
    job_id = spawned.client.post("/v1/jobs", json={"profile": EASY, "method": "1f1b"}
                                 ).json()["id"]
    assert wait_for_job(spawned.client, job_id, ("done",))["schedule_id"]
    assert spawned.fork_servers() == []


def test_every_module_the_fork_server_preloads_imports() -> None:
    # The fork server skips a preload that fails to import, silently: a renamed module
    # would leave every job paying for its import again.
    import importlib

    from ppsched.api.service.jobs import JOB_PRELOADED

    for name in JOB_PRELOADED:
        importlib.import_module(name)
