"""Tenants without a server: key settings and their one-line errors, the constant-time
lookup, the fair job queue, the token bucket, `ppsched keys hash`, the stores' migration."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from ppsched.api.service.config import Settings
from ppsched.api.service.fair_queue import FairQueue
from ppsched.api.service.quotas import QuotaExceeded, Quotas, queued_jobs_limit
from ppsched.api.service.solving import SolveSpec
from ppsched.api.service.store import SqliteStore
from ppsched.api.service.tenants import (
    Caller,
    TenantConfigError,
    Tenants,
    parse_keys,
    parse_keys_file,
    scoped,
)

REPO = Path(__file__).resolve().parents[3]
KEY_A = "a-key-of-tenant-a-0123456789"
KEY_B = "b-key-of-tenant-b-0123456789"


def _error(variable: str, words: str, call: object) -> str:
    assert callable(call)
    with pytest.raises(TenantConfigError) as caught:
        call()
    text = str(caught.value)
    assert "\n" not in text and variable in text and words in text, text
    for key in (KEY_A, KEY_B):
        assert key not in text
    return text


def test_keys_from_the_environment_string() -> None:
    digests = parse_keys(f"team-a={KEY_A}, team-b={KEY_B}")
    assert digests == {"team-a": hashlib.sha256(KEY_A.encode()).hexdigest(),
                       "team-b": hashlib.sha256(KEY_B.encode()).hexdigest()}
    tenants = Tenants(digests)
    assert tenants.enabled and tenants.names == ["team-a", "team-b"]
    found = tenants.authenticate(KEY_B)
    assert found is not None and found[0] == "team-b"
    assert tenants.authenticate(KEY_A + "x") is None
    assert tenants.authenticate("") is None
    assert not Tenants.from_settings(None, None).enabled  # open mode
    assert not Tenants.from_settings("", None).enabled


def test_bad_key_strings_fail_naming_the_variable_and_the_item() -> None:
    _error("PPSCHED_API_KEYS", "item 2", lambda: parse_keys(f"a={KEY_A},a={KEY_B}"))
    _error("PPSCHED_API_KEYS", "item 1 (tenant 'a': empty key)", lambda: parse_keys("a="))
    _error("PPSCHED_API_KEYS", "item 2 (no '=')", lambda: parse_keys(f"a={KEY_A},{KEY_B}"))
    _error("PPSCHED_API_KEYS", "a key of 5 characters", lambda: parse_keys("a=short"))
    _error("PPSCHED_API_KEYS", "a key of 19 characters",
           lambda: parse_keys("a=clé-de-seize-signes"))  # not ASCII: no header carries it
    _error("PPSCHED_API_KEYS", "item 1 (tenant 'no:colons')",
           lambda: parse_keys(f"no:colons={KEY_A}"))


def test_keys_file_with_comments_and_its_errors(tmp_path: Path) -> None:
    digest_a = hashlib.sha256(KEY_A.encode()).hexdigest()
    good = tmp_path / "keys"
    good.write_text(f"# tenants of the cluster\n\nteam-a:{digest_a}  # since May\n"
                    f"team-b : {hashlib.sha256(KEY_B.encode()).hexdigest().upper()}\n")
    tenants = Tenants.from_settings(None, good)
    assert tenants.names == ["team-a", "team-b"]
    found = tenants.authenticate(KEY_B)
    assert found is not None and found[0] == "team-b"

    bad = tmp_path / "bad"
    bad.write_text(f"# ok\nteam-a:{digest_a}\nteam-a:{digest_a}\n")
    _error("PPSCHED_API_KEYS_FILE", "line 3 (tenant 'team-a' again)",
           lambda: parse_keys_file(bad))
    bad.write_text("team-a:abc\n")
    _error("PPSCHED_API_KEYS_FILE", "line 1", lambda: parse_keys_file(bad))
    bad.write_text(f"\nteam-a {digest_a}\n")
    _error("PPSCHED_API_KEYS_FILE", "line 2 (no ':')", lambda: parse_keys_file(bad))
    bad.write_text("team-a:\n")
    _error("PPSCHED_API_KEYS_FILE", "empty key", lambda: parse_keys_file(bad))
    bad.write_text(f"team-a:{hashlib.sha256(b'').hexdigest()}\n")
    _error("PPSCHED_API_KEYS_FILE", "empty key", lambda: parse_keys_file(bad))
    _error("PPSCHED_API_KEYS_FILE", "missing", lambda: parse_keys_file(tmp_path / "missing"))
    _error("PPSCHED_API_KEYS", "PPSCHED_API_KEYS_FILE",
           lambda: Tenants.from_settings(f"a={KEY_A}", good))


def test_keys_hash_command_makes_a_line_the_service_reads(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "ppsched.api.cli", "keys", "hash", "team-a"]
    made = subprocess.run(run, input=KEY_A + "\n", capture_output=True, text=True,
                          check=True, cwd=REPO)
    line = made.stdout.strip()
    assert line == f"team-a:{hashlib.sha256(KEY_A.encode()).hexdigest()}"
    (tmp_path / "keys").write_text(line + "\n")
    found = Tenants.from_settings(None, tmp_path / "keys").authenticate(KEY_A)
    assert found is not None and found[0] == "team-a"
    short = subprocess.run(run, input="short\n", capture_output=True, text=True, cwd=REPO)
    assert short.returncode != 0 and "at least 16 printable ASCII" in short.stderr


def test_a_tenants_ids_are_its_own() -> None:
    spec = SolveSpec(profile={"p": 1}, method="heuristic", objective="time",
                     time_limit_s=1.0, backend="cpsat")
    tenants = Tenants(parse_keys(f"a={KEY_A},b={KEY_B}"))
    found_a, found_b = tenants.authenticate(KEY_A), tenants.authenticate(KEY_B)
    assert found_a is not None and found_b is not None
    as_a = scoped(spec, Caller("a", "127.0.0.1", found_a[1]))
    as_b = scoped(spec, Caller("b", "127.0.0.1", found_b[1]))
    assert len({spec.key, as_a.key, as_b.key}) == 3
    assert all(len(k) == 32 for k in (as_a.key, as_b.key))
    assert as_a.to_dict() == spec.to_dict()  # the worker and the store never see a scope
    assert scoped(spec, Caller(None, "127.0.0.1")) is spec  # open mode: ids unchanged


def test_fair_queue_takes_owners_in_turn() -> None:
    queue = FairQueue()
    for i in range(4):
        queue.put_nowait(f"flood{i}", "client:10.0.0.1")
    queue.put_nowait("b0", "team-b")
    queue.put_nowait("c0", "team-c")
    queue.put_nowait("b1", "team-b")
    taken = [queue.get_nowait() for _ in range(queue.qsize())]
    assert taken == ["flood0", "b0", "c0", "flood1", "b1", "flood2", "flood3"]
    # An owner just served waits behind one that was not, even if it queues first.
    queue.put_nowait("flood4", "client:10.0.0.1")
    queue.put_nowait("d0", "team-d")
    queue.put_nowait("b2", "team-b")
    assert [queue.get_nowait() for _ in range(3)] == ["d0", "b2", "flood4"]

    async def waits_for_a_put() -> str:
        getter = asyncio.create_task(queue.get())
        await asyncio.sleep(0)
        assert not getter.done()
        queue.put_nowait("late", "x")
        return await asyncio.wait_for(getter, 5)

    assert asyncio.run(waits_for_a_put()) == "late"


def test_token_bucket_and_concurrency() -> None:
    quotas = Quotas(Settings(quota_rate_per_s=0.5, quota_burst=2,
                             quota_concurrent_solves=1, retry_after_s=7))
    quotas.take("a", now=100.0)
    quotas.take("a", now=100.0)
    with pytest.raises(QuotaExceeded) as caught:
        quotas.take("a", now=100.0)
    assert caught.value.retry_after_s == 2  # one token at 0.5/s
    body = caught.value.body()
    assert body["field"] == "PPSCHED_QUOTA_RATE_PER_S" and body["value"] == 0.5
    quotas.take("b", now=100.0)  # another caller has its own bucket
    quotas.take("a", now=102.0)  # refilled
    quotas.enter("a")
    with pytest.raises(QuotaExceeded) as caught:
        quotas.enter("a")
    assert caught.value.retry_after_s == 7
    assert caught.value.body()["field"] == "PPSCHED_QUOTA_CONCURRENT_SOLVES"
    quotas.enter("client:10.0.0.2")
    quotas.leave("a")
    quotas.enter("a")
    assert quotas.solving("a") == 1
    unlimited = Quotas(Settings())
    for _ in range(1000):
        unlimited.take("a")
    assert queued_jobs_limit(Settings()) == 8  # half the default queue of 16
    assert queued_jobs_limit(Settings(max_queued_jobs=1)) == 1
    assert queued_jobs_limit(Settings(quota_queued_jobs=3)) == 3


def test_sqlite_store_of_before_tenants_gets_the_column(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as db:  # the jobs table as stores before tenants had it
        db.execute("CREATE TABLE jobs (id TEXT PRIMARY KEY, status TEXT NOT NULL, request "
                   "TEXT NOT NULL, request_key TEXT NOT NULL, progress TEXT, schedule_id "
                   "TEXT, error TEXT, created DOUBLE PRECISION NOT NULL, updated DOUBLE "
                   "PRECISION NOT NULL, ends INTEGER NOT NULL DEFAULT 0)")
        db.execute("INSERT INTO jobs VALUES ('old', 'done', '{}', 'k', NULL, NULL, NULL, 1, "
                   "1, 1)")
    store = SqliteStore(path)
    try:
        old = store.get_job("old")
        assert old is not None and old.tenant is None
        store.add_job("new", {"method": "heuristic"}, "k2", "team-a")
        store.add_job("open", {"method": "heuristic"}, "k3", "client:127.0.0.1")
        assert store.count_queued_of("team-a") == 1
        assert [j.id for j in store.jobs_of("team-a")] == ["new"]
        assert {j.id for j in store.jobs_of(None)} == {"old", "new", "open"}
        assert [j.id for j in store.jobs_of(None, ("done",))] == ["old"]
    finally:
        store.close()
    SqliteStore(path).close()  # opening it again migrates nothing twice
