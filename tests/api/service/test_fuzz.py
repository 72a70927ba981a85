"""Property-based fuzzing of every endpoint from the OpenAPI schema (schemathesis),
against a real server process: no 500, and every error body is JSON with a message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
from ppsched.api.service.config import Settings
from ppsched.api.service.main import create_app
from schemathesis.checks import not_a_server_error

from tests.api.service.conftest import Server

# The schema of the app as built (no server needed to read it); the calls go to a server.
_SCHEMA = create_app(Settings(db_path=Path(":memory:"))).openapi()
schema = schemathesis.openapi.from_dict(_SCHEMA)


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("fuzz")
    server = Server(folder / "store.sqlite3", {"PPSCHED_MAX_RANKS": "8",
                                               "PPSCHED_MAX_MICROBATCHES": "16",
                                               "PPSCHED_MAX_TIME_LIMIT_S": "2"},
                    folder / "server.log")
    yield server
    server.stop()


@pytest.mark.slow
@schema.parametrize()
@hypothesis.settings(max_examples=25, deadline=None, derandomize=True,
                     suppress_health_check=list(hypothesis.HealthCheck))
def test_no_server_errors_and_json_error_bodies(case: Any, fuzz_server: Server) -> None:
    response = case.call(base_url=fuzz_server.url, timeout=30)
    case.validate_response(response, checks=(not_a_server_error,))
    if response.status_code >= 400:
        content_type = response.headers["content-type"][0]  # headers: name -> values
        assert content_type.startswith("application/json"), response.text
        body = response.json()
        assert isinstance(body.get("message"), str) and body["message"], body
        assert {"field", "value", "accepted"} <= set(body), body
