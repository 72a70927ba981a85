"""A synchronous solve's schedule is written by the worker into the service's SQLite file
(`worker.solve_body`), not by the main process; where the worker cannot write it (an
in-memory store, an unwritable file), the service does, as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ppsched.api.service.store import SqliteStore
from ppsched.api.service.worker import solve_body

from tests.api.service.conftest import EASY

SPEC = {"profile": EASY, "method": "heuristic", "objective": "cost", "time_limit_s": 10.0,
        "backend": "cpsat", "layouts": "", "ops": 0}


def test_the_worker_writes_the_body_into_the_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite3"
    service = SqliteStore(path)  # the service's own connection, opened first
    outcome, body, status, stored = solve_body(SPEC, "k1", 1, service.shared_path)
    assert (outcome, stored) == ("ok", True)
    assert json.loads(body)["id"] == "k1"
    # The service reads what the worker wrote, byte for byte.
    assert service.get_schedule("k1") == body
    assert status != ""


def test_without_a_shared_file_nothing_is_written() -> None:
    memory = SqliteStore(Path(":memory:"))
    assert memory.shared_path is None
    outcome, _, _, stored = solve_body(SPEC, "k2", 1, memory.shared_path)
    assert (outcome, stored) == ("ok", False)
    assert memory.get_schedule("k2") is None  # the route writes it (`_solve_and_store`)


def test_a_file_the_worker_cannot_open_is_left_to_the_service(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")  # a file where the store's folder would be
    outcome, _, _, stored = solve_body(SPEC, "k3", 1, str(blocker / "store.sqlite3"))
    assert (outcome, stored) == ("ok", False)


def test_a_refused_profile_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite3"
    service = SqliteStore(path)
    bad = {**SPEC, "profile": {**EASY, "t_f": [-1.0] * EASY["num_ranks"]}}
    outcome, payload, _, stored = solve_body(bad, "k4", 1, service.shared_path)
    assert (outcome, stored) == ("profile_error", False)
    assert payload[0].startswith("t_f")
    assert service.get_schedule("k4") is None


def test_an_in_memory_store_is_written_by_the_service(start_server: Any) -> None:
    # No file the workers could open: the route writes the body itself, so the id it
    # answered reads back (the fallback of `_solve_and_store`).
    server = start_server(db_path=":memory:")
    answer = server.client.post("/v1/schedules", json={"profile": EASY,
                                                       "method": "heuristic"})
    assert answer.status_code == 200, answer.text
    again = server.client.get(f"/v1/schedules/{answer.json()['id']}")
    assert (again.status_code, again.text) == (200, answer.text)


def test_a_file_store_reads_back_what_the_worker_wrote(start_server: Any) -> None:
    server = start_server()
    answer = server.client.post("/v1/schedules", json={"profile": EASY, "method": "1f1b"})
    assert answer.status_code == 200, answer.text
    key = answer.json()["id"]
    assert SqliteStore(server.db_path).get_schedule(key) == answer.text
    assert server.client.get(f"/v1/schedules/{key}").text == answer.text
