"""POST /v1/schedules solved from its bytes in a worker (schedule_fast_path.py): the main
process parses nothing of a request the route would answer 200, the answers are the
route's (body, id, headers), and what the route must answer (errors, jobs, a store the
worker cannot open) still goes to it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from ppsched.api.service import schedule_fast_path
from ppsched.api.service.config import Settings
from ppsched.api.service.main import create_app
from ppsched.api.service.routers import schedules
from ppsched.api.service.worker import solve_body

from tests.api.service.conftest import profile
from tests.api.service.postgres import PostgresServer

SHORT = profile("uniform-p4-m8", num_microbatches=3)  # m < p: a warning header
JSON = {"Content-Type": "application/json"}
_VOLATILE = {"date", "x-request-id"}


def _drop_wall(body: dict[str, Any]) -> dict[str, Any]:
    """A schedule body without its solve's measured times (two solves differ there)."""
    solver = {k: v for k, v in (body.get("solver") or {}).items() if not k.endswith("_s")}
    if solver.get("progress"):  # (seconds, best, bound): the seconds are measured
        solver["progress"] = [point[1:] for point in solver["progress"]]
    return {**body, "solver": solver}


def _headers(answer: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in answer.headers.items()
            if k not in _VOLATILE and k != "content-length"}


def _post_in_process(settings: Settings, bodies: list[bytes],
                     monkeypatch: pytest.MonkeyPatch) -> tuple[list[httpx.Response], int]:
    """The bodies posted to the app in this process (its pool's workers are processes of
    their own); how often the main process ran the route's parse (`spec_and_profile`)."""
    parsed = 0
    real = schedules.spec_and_profile

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal parsed
        parsed += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(schedules, "spec_and_profile", counted)
    app = create_app(settings)

    async def run() -> list[httpx.Response]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                return [await client.post("/v1/schedules", content=body, headers=JSON)
                        for body in bodies]

    return asyncio.run(run()), parsed


def test_the_main_process_parses_no_request_the_route_would_answer_200(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(db_path=tmp_path / "store.sqlite3", workers=1)
    bodies = [json.dumps({"profile": SHORT, "method": method}).encode()
              for method in ("heuristic", "zb-h1", "heuristic")]
    # The same request again, with other bytes: the worker finds it in the store.
    bodies.append(bodies[0].replace(b":", b": ", 1))
    answers, parsed = _post_in_process(settings, bodies, monkeypatch)
    assert [a.status_code for a in answers] == [200, 200, 200, 200]
    assert [a.headers["X-Cache"] for a in answers] == ["miss", "miss", "hit", "hit"]
    assert parsed == 0
    assert answers[3].content == answers[0].content
    assert "m=3 < p=4" in answers[0].headers["X-Ppsched-Warning"]


def test_what_the_route_must_answer_goes_to_it(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(db_path=tmp_path / "store.sqlite3", workers=1)
    bodies = [json.dumps({"profile": {**SHORT, "num_ranks": 0}}).encode(),  # invalid
              json.dumps({"profile": SHORT, "method": "no-such"}).encode(),  # invalid
              # The solver refuses it (V on a one-chunk profile without the layout).
              json.dumps({"profile": SHORT, "method": "zb-v"}).encode()]
    answers, parsed = _post_in_process(settings, bodies, monkeypatch)
    assert [a.status_code for a in answers] == [422, 422, 422]
    assert answers[0].json()["field"] == "profile.num_ranks"
    assert answers[1].json()["field"] == "method"
    assert answers[2].json()["field"] == "num_chunks"
    assert parsed == 3  # each by the route, after the worker handed it back


def test_a_job_goes_to_the_route(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(db_path=tmp_path / "store.sqlite3", workers=1, max_sync_ops=10)
    answers, parsed = _post_in_process(
        settings, [json.dumps({"profile": SHORT}).encode()], monkeypatch)
    assert answers[0].status_code == 202
    assert answers[0].headers["Location"].startswith("/v1/jobs/")
    assert parsed == 1


def test_a_store_the_worker_cannot_open_leaves_the_request_to_the_route(
        monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(db_path=Path(":memory:"), workers=1)
    body = json.dumps({"profile": SHORT}).encode()
    answers, parsed = _post_in_process(settings, [body, body], monkeypatch)
    assert [a.headers["X-Cache"] for a in answers] == ["miss", "hit"]
    assert parsed == 1  # the route; then the answer memo (the same bytes)


@pytest.mark.parametrize("request_body", [
    {"profile": SHORT, "method": "heuristic"},
    {"profile": SHORT, "method": "zb-h2", "objective": "makespan"},
    {"profile": profile("uniform-p4-m8"), "method": "ilp", "work_limit": 1.0,
     "time_limit_s": 5.0},
    {"profile": profile("uniform-p4-m8"), "layouts": "1,v", "memory_limit": 6.0},
])
def test_the_fast_path_answers_as_the_route(start_server: Any, postgres: PostgresServer,
                                            request_body: dict[str, Any]) -> None:
    """A real server on a SQLite file (the fast path) and one on PostgreSQL (the route,
    whose store no worker opens): the same id, body and headers."""
    fast = start_server()
    routed = start_server(database_url=postgres.new_database())
    content = json.dumps(request_body).encode()
    ours = fast.client.post("/v1/schedules", content=content, headers=JSON)
    theirs = routed.client.post("/v1/schedules", content=content, headers=JSON)
    assert ours.status_code == theirs.status_code == 200, (ours.text, theirs.text)
    assert _headers(ours) == _headers(theirs)
    assert _drop_wall(ours.json()) == _drop_wall(theirs.json())


def test_the_worker_solves_as_the_route_does(tmp_path: Path) -> None:
    """`answer_request` against `solve_body` (the route's worker call) on the same spec:
    the same body, byte for byte but the measured times."""
    settings = Settings(db_path=tmp_path / "store.sqlite3")
    store = str(tmp_path / "store.sqlite3")
    body = json.dumps({"profile": SHORT, "method": "zb-v", "layouts": "v"}).encode()
    reply = schedule_fast_path.answer_request(
        body, b"", settings, 1, store, schedule_fast_path.time_budget_s(settings))
    assert reply[0] == "ok"
    _, key, warning, text, method, status, written = reply
    assert written and method == "zb-v" and "m=3 < p=4" in warning
    spec, _ = schedules.spec_and_profile(schedules.ScheduleRequest.model_validate_json(body),
                                         settings)
    assert spec.key == key
    outcome, routed, routed_status, _ = solve_body(spec.to_dict(), key, 1, None)
    assert outcome == "ok" and routed_status == status
    assert _drop_wall(json.loads(text)) == _drop_wall(json.loads(routed))
    # Asked again, the store answers it.
    again = schedule_fast_path.answer_request(
        body, b"", settings, 1, store, schedule_fast_path.time_budget_s(settings))
    assert again[:4] == ("hit", key, warning, text)


def test_a_time_limit_past_the_pools_budget_goes_to_the_route(tmp_path: Path) -> None:
    settings = Settings(db_path=tmp_path / "store.sqlite3", sync_time_limit_s=5.0)
    body = json.dumps({"profile": SHORT, "method": "heuristic",
                       "time_limit_s": 300.0}).encode()
    reply = schedule_fast_path.answer_request(
        body, b"", settings, 1, str(tmp_path / "store.sqlite3"),
        schedule_fast_path.time_budget_s(settings))
    assert reply == schedule_fast_path.ROUTE
