"""The service's torch CSV of a schedule with activation policies (DESIGN.md 6.3): R/O/L
dropped, and the X-Ppsched-Csv-Dropped header naming what."""

from __future__ import annotations

import json
import re

from tests.api.service.conftest import REPO, Server
from tests.api.test_policy_exports import _offload_profile


def test_service_csv_says_what_it_dropped(server: Server) -> None:
    response = server.client.post("/v1/schedules", json={"profile": _offload_profile(),
                                                         "method": "heuristic"})
    assert response.status_code == 200, response.text
    body = response.json()
    offloads = sum(op["kind"] == "O" for rank in body["ranks"] for op in rank)
    assert offloads > 0
    csv = server.client.get(body["links"]["csv"])
    assert csv.status_code == 200
    assert csv.headers["x-ppsched-csv-dropped"].startswith(
        f"torch CSV drops {offloads} O, {offloads} L ops")
    assert not re.search(r"\d[ROL]\d", csv.text)
    keep = server.client.post("/v1/schedules", json={
        "profile": json.loads((REPO / "profiles" / "uniform-p4-m8.json").read_text()),
        "method": "1f1b"}).json()
    assert "x-ppsched-csv-dropped" not in server.client.get(keep["links"]["csv"]).headers
