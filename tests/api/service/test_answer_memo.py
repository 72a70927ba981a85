"""A repeated POST /v1/schedules answered from the store without parsing it again gives
exactly the route's answer: body, X-Cache, the warning header, the metrics."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from tests.api.service.conftest import profile

# m < p: the shape warning header rides along with the answer.
SHORT = profile("uniform-p4-m8", num_microbatches=3)
_VOLATILE = {"date", "x-request-id"}


def _headers(answer: Any) -> dict[str, str]:
    return {k: v for k, v in answer.headers.items() if k not in _VOLATILE}


def test_repeated_bytes_get_the_routes_answer(start_server: Any) -> None:
    server = start_server()
    body = json.dumps({"profile": SHORT, "method": "heuristic"}).encode()
    post = lambda: server.client.post(  # noqa: E731
        "/v1/schedules", content=body, headers={"Content-Type": "application/json"})
    first = post()
    assert first.status_code == 200 and first.headers["X-Cache"] == "miss"
    # Through the route: same JSON, other bytes (a space), so the memo does not know it.
    spaced = server.client.post("/v1/schedules", content=body.replace(b":", b": ", 1),
                                headers={"Content-Type": "application/json"})
    assert spaced.headers["X-Cache"] == "hit"
    memo = post()
    assert memo.content == spaced.content == first.content
    assert _headers(memo) == _headers(spaced)
    assert "m=3 < p=4" in memo.headers["X-Ppsched-Warning"]
    metrics = server.client.get("/metrics").text
    assert "ppsched_cache_hits_total 2.0" in metrics
    assert 'ppsched_http_requests_total{method="POST",route="/v1/schedules",status="200"} ' \
           '3.0' in metrics


def test_a_key_gone_from_the_store_is_solved_again(start_server: Any) -> None:
    server = start_server()
    body = json.dumps({"profile": SHORT, "method": "1f1b"}).encode()
    headers = {"Content-Type": "application/json"}
    first = server.client.post("/v1/schedules", content=body, headers=headers)
    assert first.status_code == 200
    with sqlite3.connect(server.db_path) as db:  # as the retention task deletes it
        db.execute("DELETE FROM schedules WHERE id = ?", (first.json()["id"],))
    again = server.client.post("/v1/schedules", content=body, headers=headers)
    assert again.headers["X-Cache"] == "miss"
    # The same schedule (its solver block holds the new solve's wall time).
    drop = lambda body: {k: v for k, v in body.items() if k != "solver"}  # noqa: E731
    assert drop(again.json()) == drop(first.json())


def test_invalid_bytes_are_never_remembered(start_server: Any) -> None:
    server = start_server()
    bad = json.dumps({"profile": {**SHORT, "num_ranks": 0}}).encode()
    for _ in range(2):
        answer = server.client.post("/v1/schedules", content=bad,
                                    headers={"Content-Type": "application/json"})
        assert answer.status_code == 422
        assert answer.json()["field"].startswith("profile")
