"""Eyes on the service (issue 29): request ids on responses and log lines, JSON logs,
the jobs' ids on their lines, and the metrics a dashboard reads, through a real server."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from tests.api.service.conftest import EASY, Server, profile


def _log_records(server: Server) -> list[dict[str, Any]]:
    """The server's JSON log lines (the log file also holds the CLI's own lines written
    before uvicorn configured logging)."""
    records = []
    for line in server.log_path.read_text().splitlines():
        if line.startswith("{"):
            records.append(json.loads(line))
    return records


def _wait_for(predicate: Any, what: str, timeout_s: float = 120) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _metric(text: str, name: str, **labels: str) -> float | None:
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        sample, _, label_text = head.partition("{")
        if sample != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', label_text))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(value)
    return None


def test_request_ids_on_responses_and_json_log_lines(start_server: Any) -> None:
    server = start_server(log_format="json", max_body_bytes=4096)
    mine = server.client.post("/v1/schedules", json={"profile": EASY},
                              headers={"X-Request-ID": "client-7f3a.1"})
    assert mine.status_code == 200, mine.text
    assert mine.headers["X-Request-ID"] == "client-7f3a.1"
    made = server.client.get("/healthz")
    assert re.fullmatch(r"[0-9a-f]{32}", made.headers["X-Request-ID"])
    # An id that could forge log lines or flood them is replaced, not echoed.
    for bad in ("two words", "x" * 129, 'quote"d'):
        answer = server.client.get("/healthz", headers={"X-Request-ID": bad})
        assert re.fullmatch(r"[0-9a-f]{32}", answer.headers["X-Request-ID"]), bad
    # A refusal before any route runs (the body limit's 413) carries one too.
    refused = server.client.post("/v1/schedules", content=b"{" + b" " * 8000 + b"}",
                                 headers={"Content-Type": "application/json",
                                          "X-Request-ID": "big-1"})
    assert refused.status_code == 413
    assert refused.headers["X-Request-ID"] == "big-1"

    def access_line() -> dict[str, Any] | None:
        return next((r for r in _log_records(server) if r["request_id"] == "client-7f3a.1"
                     and "POST /v1/schedules" in r["message"]), None)

    record = _wait_for(access_line, "the request's access log line")
    assert record["logger"] == "uvicorn.access" and record["level"] == "INFO"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["time"])
    # Lines outside any request say so.
    ready = next(r for r in _log_records(server) if "service ready" in r["message"])
    assert ready["request_id"] == "-"


def test_a_jobs_log_lines_carry_its_id_and_its_times_are_measured(start_server: Any) -> None:
    server = start_server(log_format="json", max_sync_ops=0)
    accepted = server.client.post("/v1/schedules", json={"profile": EASY})
    assert accepted.status_code == 202, accepted.text
    job_id = accepted.json()["id"]
    _wait_for(lambda: server.client.get(f"/v1/jobs/{job_id}").json()["status"] == "done",
              "the job to finish")

    def job_lines() -> list[dict[str, Any]]:
        lines = [r for r in _log_records(server) if r.get("job_id") == job_id]
        return lines if any("job ended" in r["message"] for r in lines) else []

    lines = _wait_for(job_lines, "the job's log lines")
    started = next(r for r in lines if r["message"].startswith("job started"))
    assert started["method"] == "heuristic" and started["waited_s"] >= 0
    text = server.client.get("/metrics").text
    assert _metric(text, "ppsched_job_wait_seconds_count", method="heuristic") == 1
    assert _metric(text, "ppsched_job_run_seconds_count", method="heuristic") == 1
    assert _metric(text, "ppsched_job_runner_alive") == 1


def test_metrics_by_route_template_cpu_loop_lag_and_pool_wait(start_server: Any) -> None:
    server = start_server()  # text logs, the default
    body = server.client.post("/v1/schedules", json={"profile": profile("uniform-p4-m8",
                                                                        t_f=1.25)}).json()
    for _ in range(3):
        assert server.client.get(f"/v1/schedules/{body['id']}").status_code == 200
    text = server.client.get("/metrics").text
    # One label for every id: the route's template, never the raw path.
    assert _metric(text, "ppsched_http_main_cpu_seconds_count", method="GET",
                   route="/v1/schedules/{schedule_id}") == 3
    assert body["id"] not in text
    post_cpu = _metric(text, "ppsched_http_main_cpu_seconds_sum", method="POST",
                       route="/v1/schedules")
    assert post_cpu is not None and post_cpu > 0
    assert _metric(text, "ppsched_pool_wait_seconds_count") == 1
    # The loop's watch has fired (a state: at least one observation).
    _wait_for(lambda: (_metric(server.client.get("/metrics").text,
                               "ppsched_event_loop_lag_observed_seconds_count") or 0) >= 1,
              "a loop-lag observation")
    assert _metric(text, "ppsched_store_errors_total") is None  # none so far
    # Text log lines carry the request id in brackets.
    rid = server.client.get("/healthz").headers["X-Request-ID"]
    _wait_for(lambda: f"[{rid}]" in server.log_path.read_text(), "a text line with the id")
