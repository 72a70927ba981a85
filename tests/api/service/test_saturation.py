"""Saturation against a real server: a full solver pool answers 503 and a full job queue
429, both with Retry-After and at once; both recover when the work drains."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from tests.api.service.conftest import EASY, HARD, assert_error, wait_for_job


def test_full_pool_answers_503_then_recovers(start_server: Any) -> None:
    server = start_server(workers=1, queue_size=0, retry_after_s=2, sync_time_limit_s=10)
    slow = {"profile": HARD, "method": "ilp", "time_limit_s": 3.0}
    results: list[httpx.Response] = []
    worker = threading.Thread(target=lambda: results.append(
        server.client.post("/v1/schedules", json=slow)))
    worker.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # until the slow solve holds the only worker
        metrics = server.client.get("/metrics").text
        if 'ppsched_in_progress{queue="solve"} 1.0' in metrics:
            break
        time.sleep(0.05)
    began = time.monotonic()
    busy = server.client.post("/v1/schedules", json={"profile": EASY, "method": "1f1b"})
    assert time.monotonic() - began < 2  # refused at once, never hangs
    assert_error(busy, 503, None, "solver pool is full", "retry in 2 s")
    assert busy.headers["retry-after"] == "2"
    # Refused before parsing: a body that is not even JSON gets the 503, not a 422.
    unread = server.client.post("/v1/schedules", content=b"{not json",
                                headers={"content-type": "application/json"})
    assert_error(unread, 503, None, "solver pool is full")
    assert server.client.get("/healthz").status_code == 200  # the rest still answers
    worker.join(timeout=60)
    assert results[0].status_code == 200
    recovered = server.client.post("/v1/schedules", json={"profile": EASY, "method": "1f1b"})
    assert recovered.status_code == 200


def test_full_job_queue_answers_429_then_recovers(start_server: Any) -> None:
    server = start_server(job_workers=1, max_queued_jobs=1, retry_after_s=3)
    running = server.client.post("/v1/jobs", json={"profile": HARD, "method": "ilp",
                                                   "time_limit_s": 60.0}).json()["id"]
    wait_for_job(server.client, running, ("running",))
    queued = server.client.post("/v1/jobs", json={"profile": EASY, "method": "ilp",
                                                  "time_limit_s": 30.0})
    assert queued.status_code == 202 and queued.json()["status"] == "queued"
    full = server.client.post("/v1/jobs", json={"profile": EASY, "method": "gpipe"})
    assert_error(full, 429, None, "job queue is full")
    assert full.headers["retry-after"] == "3"
    assert 'ppsched_queue_depth{queue="jobs"} 1.0' in server.client.get("/metrics").text
    server.client.delete(f"/v1/jobs/{running}")
    wait_for_job(server.client, queued.json()["id"], ("done",))
    again = server.client.post("/v1/jobs", json={"profile": EASY, "method": "gpipe"})
    assert again.status_code == 202
    assert wait_for_job(server.client, again.json()["id"], ("done",))["schedule_id"]
