"""The HTTP contract (issue 29): the OpenAPI document declares every status a route
answers, states the service's limits as maxima, and a 405 names every method its path
has; DELETE on a job is a cancel and the job stays readable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ppsched.api.service.config import Settings
from ppsched.api.service.main import create_app

from tests.api.service.conftest import EASY, assert_error, wait_for_job


def _schema(**settings: Any) -> dict[str, Any]:
    document: dict[str, Any] = create_app(Settings(db_path=Path(":memory:"),
                                                   **settings)).openapi()
    return document


def test_every_route_declares_the_statuses_it_answers() -> None:
    paths = _schema()["paths"]
    for path, operations in paths.items():
        for method, operation in operations.items():
            declared = set(operation["responses"])
            if "requestBody" in operation:  # the framework's and the middleware's
                assert {"400", "408", "413", "422"} <= declared, (method, path, declared)
    for path in ("/v1/schedules", "/v1/pack", "/v1/advise", "/v1/simulate", "/v1/validate"):
        responses = paths[path]["post"]["responses"]
        assert "503" in responses and "Retry-After" in responses["503"]["headers"], path
    assert "429" in paths["/v1/schedules"]["post"]["responses"]
    for view in (".svg", ".csv", "/trace"):
        assert "503" in paths["/v1/schedules/{schedule_id}" + view]["get"]["responses"]
    assert "cancel" in paths["/v1/jobs/{job_id}"]["delete"]["description"].lower()


def test_the_schemas_state_the_service_limits() -> None:
    components = _schema(max_pack_replicas=7, max_time_limit_s=2.0,
                         max_advise_gpus=9)["components"]["schemas"]
    assert components["PackRequest"]["properties"]["replicas"]["maximum"] == 7
    time_limit = components["ScheduleRequest"]["properties"]["time_limit_s"]
    assert time_limit["maximum"] == 2.0 and time_limit["default"] == 2.0
    assert components["Cluster"]["properties"]["num_gpus"]["maximum"] == 9
    assert components["PackRequest"]["properties"]["profile"]["$ref"].endswith("/Profile")


def test_a_405_names_every_method_of_its_path(server: Any) -> None:
    path = "/v1/jobs/9b1f0c2d3e4a5b6c7d8e9f0a1b2c3d4e"
    for method in ("OPTIONS", "PUT", "PATCH"):
        response = server.client.request(method, path)
        assert_error(response, 405, "method", "Method Not Allowed")
        assert response.headers["allow"] == "DELETE, GET", response.headers


def test_delete_cancels_and_the_job_stays_readable(server: Any) -> None:
    job = server.client.post("/v1/jobs", json={"profile": {**EASY, "t_f": 1.25}}).json()
    wait_for_job(server.client, job["id"], ("done", "failed", "cancelled"))
    first = server.client.delete(f"/v1/jobs/{job['id']}")
    again = server.client.delete(f"/v1/jobs/{job['id']}")
    read = server.client.get(f"/v1/jobs/{job['id']}")
    assert first.status_code == again.status_code == read.status_code == 200
    assert first.json()["status"] == again.json()["status"] == read.json()["status"]


def test_a_default_time_limit_over_a_lower_ceiling_is_not_refused(start_server: Any) -> None:
    server = start_server(max_time_limit_s=2)
    response = server.client.post("/v1/schedules", json={"profile": EASY})
    assert response.status_code == 200, response.text
    over = server.client.post("/v1/schedules", json={"profile": EASY, "time_limit_s": 3})
    assert_error(over, 422, "time_limit_s", "PPSCHED_MAX_TIME_LIMIT_S")
