"""Retention: stored results expire by age and by total size, a running job's checkpoint
is kept, and the cleanup task of a real server deletes what expired."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from ppsched.api.service.store import PostgresStore, SqliteStore, Store

from tests.api.service.conftest import EASY
from tests.api.service.postgres import PostgresServer, wait_until


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        made: Store = SqliteStore(tmp_path / "store.sqlite3")
    else:
        server: PostgresServer = request.getfixturevalue("postgres")
        made = PostgresStore(server.new_database())
    yield made
    made.close()


def test_prune_by_size_and_age_keeps_active_checkpoints(store: Store) -> None:
    now = time.time()
    for i in range(6):  # s0 oldest ... s5 newest, 1,000 bytes each
        store.put_schedule(f"s{i}", "x" * 1000)
        store._one("UPDATE schedules SET created = ? WHERE id = ?", (now - 100 + i, f"s{i}"))
    job = store.add_job("j", {"method": "ilp"}, "k")
    store.update_job(job.id, schedule_id="s0")  # a queued job's checkpoint: kept
    assert store.prune(max_age_s=3600, max_bytes=2500) == 3
    assert [i for i in range(6) if store.get_schedule(f"s{i}")] == [0, 4, 5]
    # By age: everything older than 50 s goes, except the active job's checkpoint.
    store.put_schedule("fresh", "y")
    assert store.prune(max_age_s=50, max_bytes=10**9) == 2
    assert store.get_schedule("s0") and store.get_schedule("fresh")
    # Once the job is finished (and old), it and its schedule go too.
    store.update_job(job.id, status="done")
    store._one("UPDATE jobs SET updated = ? WHERE id = ?", (now - 100, job.id))
    assert store.prune(max_age_s=50, max_bytes=10**9) == 1
    assert store.get_job(job.id) is None and store.get_schedule("fresh") == "y"


def test_the_cleanup_task_deletes_expired_results(start_server: Any) -> None:
    server = start_server(retention_age_s=1, retention_interval_s=0.2)
    body = server.client.post("/v1/schedules", json={"profile": EASY}).json()
    url = f"/v1/schedules/{body['id']}"
    wait_until(lambda: server.client.get(url).status_code == 404, 60, "the result expired")
    again = server.client.post("/v1/schedules", json={"profile": EASY})
    assert again.status_code == 200 and again.headers["x-cache"] == "miss"
