"""The worker pool against real servers: a dead worker fails only its own request and is
replaced once, a client disconnect frees its worker, SIGTERM drains in-flight work, and
no semaphore leaks. Every wait is on an observed state."""

from __future__ import annotations

import json
import os
import signal
import socket
from typing import Any

import httpx

from tests.api.service.conftest import EASY, HARD, Server, post_in_thread
from tests.api.service.postgres import wait_until


def _busy(server: Server) -> float:
    text = server.client.get("/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(('ppsched_in_progress{queue="solve"}',
                                   'ppsched_queue_depth{queue="solve"}')))


def test_a_dead_worker_fails_only_its_own_request(start_server: Any) -> None:
    server = start_server(workers=2, sync_time_limit_s=60)
    assert server.client.post("/v1/schedules", json={"profile": EASY}).status_code == 200
    workers = set(server.children())
    assert len(workers) == 2
    results: list[httpx.Response] = []
    threads = [post_in_thread(server, "/v1/schedules", {"profile": HARD, "method": "ilp",
                                        "time_limit_s": limit}, results)
               for limit in (6.0, 7.0)]
    wait_until(lambda: _busy(server) == 2, 60, "both workers busy")
    os.kill(min(workers), signal.SIGKILL)
    for thread in threads:
        thread.join(120)
    codes = sorted(r.status_code for r in results)
    assert codes == [200, 503], [r.text for r in results]
    lost = next(r for r in results if r.status_code == 503)
    assert "worker process died" in lost.json()["message"] and lost.headers["retry-after"]
    # Replaced once: two workers again, one of them new, and the pool answers.
    wait_until(lambda: len(server.children()) == 2, 30, "the worker replaced")
    now = set(server.children())
    assert len(now - workers) == 1 and min(workers) not in now
    again = server.client.post("/v1/schedules", json={"profile": {**EASY, "t_f": 1.5}})
    assert again.status_code == 200


def test_a_client_disconnect_frees_its_worker(start_server: Any) -> None:
    server = start_server(workers=1, sync_time_limit_s=120)
    body = json.dumps({"profile": HARD, "method": "ilp", "time_limit_s": 100.0}).encode()
    raw = socket.create_connection(("127.0.0.1", server.port))
    raw.sendall(b"POST /v1/schedules HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    wait_until(lambda: _busy(server) == 1, 60, "the solve running")
    before = set(server.children())
    raw.close()  # the client gives up
    # The worker is free again long before the search's 100 s: its process was replaced.
    wait_until(lambda: _busy(server) == 0, 30, "the worker freed")
    wait_until(lambda: set(server.children()) - before != set(), 30, "a fresh worker")
    assert server.client.post("/v1/schedules", json={"profile": EASY}).status_code == 200


def test_sigterm_drains_in_flight_work_without_leaks(start_server: Any) -> None:
    server = start_server(workers=1, sync_time_limit_s=60)
    results: list[httpx.Response] = []
    thread = post_in_thread(server, "/v1/schedules", {"profile": HARD, "method": "ilp",
                                      "time_limit_s": 3.0}, results)
    wait_until(lambda: _busy(server) == 1, 60, "the solve running")
    workers = server.children()
    server.process.send_signal(signal.SIGTERM)
    thread.join(120)
    assert results and results[0].status_code == 200, results
    assert results[0].json()["metrics"]["cost"] > 0  # the whole answer, not an error
    # uvicorn ends a graceful shutdown by re-raising the signal it caught.
    assert server.process.wait(60) in (0, -signal.SIGTERM)
    wait_until(lambda: not any(os.path.exists(f"/proc/{pid}") for pid in workers), 30,
               "the workers gone")
    log = server.log_path.read_text()
    assert "leaked semaphore" not in log and "Traceback" not in log, log[-2000:]
