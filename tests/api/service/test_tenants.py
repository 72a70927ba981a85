"""Tenants against real servers (SQLite, and the real PostgreSQL of postgres.py): keys
answer 401 without a valid one, a tenant cannot see or cancel another's job, quotas
answer 429 with Retry-After, keys never reach the log, and open mode keeps one client
from filling the job queue."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from typing import Any

import httpx
import psycopg
import pytest
from ppsched.api.service.config import Settings
from ppsched.api.service.store import open_store

from tests.api.service.conftest import (
    EASY,
    HARD,
    REPO,
    Server,
    assert_error,
    wait_for_job,
)
from tests.api.service.postgres import PostgresServer

KEY_A = "key-of-team-a-4f1c9e2b7d"
KEY_B = "key-of-team-b-8a3d5f6c1e"
KEYS = f"team-a={KEY_A},team-b={KEY_B}"
LONG = {"profile": HARD, "method": "ilp", "time_limit_s": 120.0}


def _as(server: Server, key: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=60,
                        headers={"Authorization": f"Bearer {key}"})


def _isolation(server: Server) -> None:
    """Tenant B cannot read, list, cancel or see the progress of tenant A's job; the
    same request of B's is a job of its own."""
    a, b = _as(server, KEY_A), _as(server, KEY_B)
    with a, b:
        submitted = a.post("/v1/jobs", json=LONG)
        assert submitted.status_code == 202, submitted.text
        job_id = submitted.json()["id"]
        wait_for_job(a, job_id, ("running",), has_progress=True)
        for response in (b.get(f"/v1/jobs/{job_id}"), b.delete(f"/v1/jobs/{job_id}")):
            assert_error(response, 404, "job", job_id)
        assert a.get(f"/v1/jobs/{job_id}").json()["status"] == "running"  # not cancelled
        assert [j["id"] for j in a.get("/v1/jobs").json()["jobs"]] == [job_id]
        assert b.get("/v1/jobs").json()["jobs"] == []
        theirs = b.post("/v1/jobs", json=LONG)
        assert theirs.status_code == 202 and theirs.json()["id"] != job_id
        assert [j["id"] for j in b.get("/v1/jobs?status=queued&status=running").json()[
            "jobs"]] == [theirs.json()["id"]]
        for client, own in ((a, job_id), (b, theirs.json()["id"])):
            cancelled = client.delete(f"/v1/jobs/{own}")
            assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        # A schedule's id is its tenant's own: the same request, two ids.
        request = {"profile": EASY, "method": "1f1b"}
        ids = {client.post("/v1/schedules", json=request).json()["id"] for client in (a, b)}
        assert len(ids) == 2


def test_keys_answer_401_and_tenants_do_not_see_each_other(start_server: Any) -> None:
    server = start_server(api_keys=KEYS, job_workers=2)
    anonymous = server.client
    missing = anonymous.post("/v1/jobs", json=LONG)
    body = assert_error(missing, 401, "Authorization", "API key is required")
    assert missing.headers["www-authenticate"] == 'Bearer realm="ppsched"'
    assert body["value"] is None
    wrong = anonymous.get("/v1/methods", headers={"Authorization": f"Bearer {KEY_A}x"})
    assert_error(wrong, 401, "Authorization", "matches no tenant")
    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
    assert KEY_A not in wrong.text
    basic = anonymous.get("/v1/methods", headers={"Authorization": "Basic dXNlcjpwdw=="})
    assert_error(basic, 401, "Authorization", "API key is required")
    assert wrong.headers["x-content-type-options"] == "nosniff"  # security headers kept
    # Open without a key: the probes, the page and its files, the API's documentation.
    for path in ("/healthz", "/readyz", "/", "/static/app.js", "/favicon.ico",
                 "/openapi.json", "/docs"):
        assert anonymous.get(path).status_code == 200, path
    assert anonymous.get("/metrics").status_code == 401  # PPSCHED_METRICS_OPEN unset
    paths = anonymous.get("/openapi.json").json()["paths"]  # the contract says so
    assert {"401", "429"} <= set(paths["/v1/jobs/{job_id}"]["delete"]["responses"])
    assert "401" not in paths["/healthz"]["get"]["responses"]
    with _as(server, KEY_B) as b:
        assert b.get("/metrics").status_code == 200
        assert b.get("/v1/methods").status_code == 200
    _isolation(server)

    # Keys never reach the log (uvicorn's access log included): the log has the requests
    # (and the tenants' count), never a key.
    server.stop()
    log = server.log_path.read_text()
    assert "GET /v1/jobs" in log and "API keys: 2 tenants" in log
    assert KEY_A not in log and KEY_B not in log


def test_keys_file_and_open_metrics(start_server: Any, tmp_path: Any) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"# the team\nteam-a:{hashlib.sha256(KEY_A.encode()).hexdigest()}\n")
    server = start_server(api_keys_file=keys, metrics_open="true")
    assert server.client.get("/metrics").status_code == 200
    assert server.client.get("/v1/methods").status_code == 401
    with _as(server, KEY_A) as a:
        assert a.get("/v1/methods").status_code == 200


def test_a_bad_key_setting_stops_start_up_in_one_line(tmp_path: Any) -> None:
    env = {"PPSCHED_API_KEYS": f"team-a={KEY_A},team-a={KEY_B}",
           "PPSCHED_DB_PATH": str(tmp_path / "db.sqlite3")}
    done = subprocess.run([sys.executable, "-m", "ppsched.api.cli", "serve", "--port", "0"],
                          env={**os.environ, **env}, capture_output=True, text=True,
                          cwd=REPO, timeout=60)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "PPSCHED_API_KEYS" in lines[0] and "item 2" in lines[0]
    assert KEY_A not in done.stderr and KEY_B not in done.stderr


def test_quotas_answer_429_with_retry_after(start_server: Any) -> None:
    server = start_server(api_keys=KEYS, job_workers=1, quota_queued_jobs=1,
                          quota_concurrent_solves=1, workers=2, retry_after_s=4,
                          sync_time_limit_s=10)
    with _as(server, KEY_A) as a, _as(server, KEY_B) as b:
        running = a.post("/v1/jobs", json=LONG).json()["id"]
        wait_for_job(a, running, ("running",))
        queued = a.post("/v1/jobs", json={**LONG, "time_limit_s": 119.0})
        assert queued.status_code == 202
        over = a.post("/v1/jobs", json={**LONG, "time_limit_s": 118.0})
        body = assert_error(over, 429, "PPSCHED_QUOTA_QUEUED_JOBS", "tenant 'team-a'")
        assert body["value"] == 1 and over.headers["retry-after"] == "4"
        # The queue is not full for the others.
        theirs = b.post("/v1/jobs", json={**LONG, "time_limit_s": 117.0})
        assert theirs.status_code == 202, theirs.text

        # Concurrent solves: while A's slow solve holds a worker, A's next one is refused,
        # B's is answered.
        slow = {"profile": HARD, "method": "ilp", "time_limit_s": 4.0}
        results: list[httpx.Response] = []
        worker = threading.Thread(target=lambda: results.append(
            a.post("/v1/schedules", json=slow)))
        worker.start()
        refused = None
        while worker.is_alive():
            metrics = b.get("/metrics").text
            if 'ppsched_in_progress{queue="solve"} 1.0' in metrics:
                refused = a.post("/v1/schedules", json={"profile": EASY, "method": "1f1b"})
                break
            time.sleep(0.05)
        assert refused is not None, "the slow solve ended before it was seen in progress"
        assert_error(refused, 429, "PPSCHED_QUOTA_CONCURRENT_SOLVES", "tenant 'team-a'")
        assert refused.headers["retry-after"] == "4"
        assert b.post("/v1/schedules", json={"profile": EASY, "method": "1f1b"}) \
            .status_code == 200
        worker.join(timeout=120)
        assert results[0].status_code == 200
        for client, job in ((a, running), (a, queued.json()["id"]), (b, theirs.json()["id"])):
            client.delete(f"/v1/jobs/{job}")


def test_request_rate_answers_429_with_retry_after(start_server: Any) -> None:
    server = start_server(quota_rate_per_s=0.2, quota_burst=3)  # open mode, per client
    statuses = [server.client.get("/v1/methods").status_code for _ in range(4)]
    assert statuses[:3] == [200, 200, 200]
    limited = server.client.get("/v1/methods")
    body = assert_error(limited, 429, "PPSCHED_QUOTA_RATE_PER_S", "client 127.0.0.1")
    assert body["value"] == 0.2 and 1 <= int(limited.headers["retry-after"]) <= 5
    assert server.client.get("/healthz").status_code == 200  # probes are never limited
    # Another client address has its own bucket.
    other = httpx.Client(base_url=server.url, timeout=60,
                         transport=httpx.HTTPTransport(local_address="127.0.0.2"))
    with other:
        assert other.get("/v1/methods").status_code == 200


def test_open_mode_one_client_cannot_fill_the_job_queue(start_server: Any) -> None:
    server = start_server(job_workers=1, max_queued_jobs=4, retry_after_s=3)
    first = server.client.post("/v1/jobs", json=LONG).json()["id"]
    wait_for_job(server.client, first, ("running",))
    accepted = [server.client.post("/v1/jobs", json={**LONG, "time_limit_s": 100.0 - i})
                for i in range(3)]
    assert [r.status_code for r in accepted] == [202, 202, 429]  # half of 4 each
    assert_error(accepted[2], 429, "PPSCHED_QUOTA_QUEUED_JOBS", "client 127.0.0.1")
    other = httpx.Client(base_url=server.url, timeout=60,
                         transport=httpx.HTTPTransport(local_address="127.0.0.2"))
    with other:
        quick = other.post("/v1/jobs", json={"profile": EASY, "method": "1f1b"})
        assert quick.status_code == 202, quick.text
        # Open mode: everyone sees every job, as before tenants.
        assert other.get(f"/v1/jobs/{first}").status_code == 200
        listed = {j["id"] for j in other.get("/v1/jobs").json()["jobs"]}
        assert first in listed and quick.json()["id"] in listed
        # Fair: the other client's job runs next, ahead of the first client's queue.
        server.client.delete(f"/v1/jobs/{first}")
        wait_for_job(other, quick.json()["id"], ("done",))
        waiting = [r.json()["id"] for r in accepted[:2]]
        assert all(server.client.get(f"/v1/jobs/{j}").json()["status"] in
                   ("queued", "running") for j in waiting)
        for job in waiting:
            server.client.delete(f"/v1/jobs/{job}")


def test_tenants_on_postgres_and_its_migration(postgres: PostgresServer,
                                               start_server: Any) -> None:
    url = postgres.new_database()
    with psycopg.connect(url, autocommit=True) as conn:  # a store of before tenants
        conn.execute("CREATE TABLE jobs (id TEXT PRIMARY KEY, status TEXT NOT NULL, request "
                     "TEXT NOT NULL, request_key TEXT NOT NULL, progress TEXT, schedule_id "
                     "TEXT, error TEXT, created DOUBLE PRECISION NOT NULL, updated DOUBLE "
                     "PRECISION NOT NULL, ends INTEGER NOT NULL DEFAULT 0)")
        conn.execute("INSERT INTO jobs VALUES ('old', 'done', '{}', 'k', NULL, NULL, NULL, "
                     "1, 1, 1)")
    store = open_store(Settings(database_url=url))
    try:
        old = store.get_job("old")
        assert old is not None and old.tenant is None
    finally:
        store.close()
    server = start_server(api_keys=KEYS, database_url=url, job_workers=2)
    with _as(server, KEY_A) as a:
        # The old job has no tenant: no tenant sees it once keys are on.
        assert a.get("/v1/jobs/" + "0" * 32).status_code == 404
        assert a.get("/v1/jobs").json()["jobs"] == []
    _isolation(server)


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx honours *_PROXY variables; these tests talk to loopback only.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
