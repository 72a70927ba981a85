"""A database outage, as an operator makes one: PostgreSQL stopped (`pg_ctl stop -m
fast`) for about 10 s under a replica running and queuing jobs, then started again.
During it the store's calls answer 503 with Retry-After and the JSON error body (never
a 500), `/readyz` says the store is down; after it `/readyz` comes back by itself, and
the job that was running, the queued ones and new ones all complete."""

from __future__ import annotations

import time
from typing import Any

import httpx
from ppsched.solver.model.schedule import parse_schedule

from tests.api.service.conftest import EASY, HARD, assert_error
from tests.api.service.postgres import PostgresServer, wait_until

OUTAGE_S = 10.0  # the scenario's length (issue 29), not a wait for some state


def _final(client: httpx.Client, job_id: str) -> bool:
    return bool(client.get(f"/v1/jobs/{job_id}").json()["status"] in
                ("done", "failed", "cancelled"))


def test_a_database_outage_answers_503_and_recovers(own_postgres: PostgresServer,
                                                     start_server: Any) -> None:
    url = own_postgres.new_database()
    server = start_server(database_url=url, job_workers=1, workers=1, job_lease_s=6,
                          checkpoint_interval_s=0.5, store_checkout_timeout_s=1)
    client = server.client
    ilp = client.post("/v1/jobs", json={"profile": HARD, "method": "ilp",
                                        "time_limit_s": 8.0}).json()["id"]
    queued = [client.post("/v1/jobs", json={"profile": {**EASY, "t_f": EASY["t_f"] + i / 100},
                                            "method": "heuristic"}).json()["id"]
              for i in range(2)]

    def ilp_running() -> bool:
        job = client.get(f"/v1/jobs/{ilp}").json()
        return bool(job["status"] == "running" and job["schedule_id"])

    wait_until(ilp_running, 120, "the ilp job running with a checkpoint")

    own_postgres.pause()
    began = time.monotonic()
    seen = {"job": 0, "submit": 0, "ready": 0}
    while time.monotonic() - began < OUTAGE_S:
        body = assert_error(client.get(f"/v1/jobs/{queued[0]}"), 503, None, "store")
        assert body["accepted"].startswith("a retry")
        seen["job"] += 1
        refused = client.post("/v1/jobs", json={"profile": EASY, "method": "1f1b"})
        assert_error(refused, 503, None, "store")
        assert int(refused.headers["Retry-After"]) >= 1
        seen["submit"] += 1
        ready = client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["store"] is False
        seen["ready"] += 1
        assert client.get("/healthz").status_code == 200
    assert min(seen.values()) >= 3, seen
    own_postgres.start()

    def ready_again() -> bool:
        response = client.get("/readyz")
        return response.status_code == 200 and response.json()["checks"] == {
            "store": True, "pool": True, "jobs": True}

    wait_until(ready_again, 60, "/readyz back after the outage")
    after = client.post("/v1/jobs", json={"profile": EASY, "method": "zb-h1"})
    assert after.status_code == 202, after.text
    jobs = [ilp, *queued, after.json()["id"]]
    for job_id in jobs:
        wait_until(lambda job_id=job_id: _final(client, job_id), 180, f"job {job_id} final")
    for job_id in jobs:
        job = client.get(f"/v1/jobs/{job_id}").json()
        assert job["status"] == "done", job
        schedule = client.get(f"/v1/schedules/{job['schedule_id']}")
        assert schedule.status_code == 200
        assert parse_schedule(schedule.json()).metrics is not None
    log = server.log_path.read_text()
    assert "unexpected error" not in log and "StoreSettingError" not in log
    assert "store down" in log and "store back" in log
