"""Bounded calls against real servers (issue 29): a huge pack, advise, simulate or validate
runs in the worker pool, leaves /healthz answering and is refused (a size limit or the
time budget, named), or cancelled when its client goes; a full pool refuses a pack with
503 before reading its body; a body trickled in is answered 408 and closed. Every wait
is on an observed state."""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from typing import Any

import httpx

from tests.api.service.conftest import EASY, Server, assert_error, post_in_thread
from tests.api.service.postgres import wait_until

# 3,000 samples of 1-60 tokens into 64 replicas of 16 ranks: within every size limit, and
# 55 s of CPU in one process on this machine (measured: time.process_time around
# pack_json). A 12 KB body.
_rng = random.Random(0)
HUGE_PACK = {"lengths": [_rng.randint(1, 60) for _ in range(3000)], "cap": 1024,
             "replicas": 64,
             "profile": {"num_ranks": 16, "num_microbatches": 16, "t_f": 1.0, "t_b": 1.0,
                         "t_w": 1.0, "m_b": 1.0, "m_w": 1.0}}
SMALL_PACK = {"lengths": [900, 4000, 1200, 300], "cap": 8192, "replicas": 2,
              "profile": {"num_ranks": 2, "num_microbatches": 2, "t_f": 1.0, "t_b": 1.0,
                          "t_w": 1.0, "m_b": 1.0, "m_w": 1.0}}
# The advisor at its limits (64 GPUs, 256 microbatches, 1,024 layers): 8.8 s of CPU.
HUGE_ADVISE = {"model": {"layers": 1024, "hidden": 4096, "heads": 32, "seq_len": 4096,
                         "microbatch_size": 1, "vocab": 32000},
               "cluster": {"num_gpus": 64, "gpus_per_node": 8, "gpu_tflops": 312,
                           "gpu_memory_gb": 80, "intra_node_gbps": 200,
                           "inter_node_gbps": 1.25},
               "num_microbatches": 256}


def _big_schedule() -> dict[str, Any]:
    """1F1B at p=16, m=512: 16,384 ops (F and BW), 1.1 MB of JSON (0.15 s of CPU to
    validate)."""
    from ppsched.solver.model import parse_profile
    from ppsched.solver.solving import solve

    profile = {"num_ranks": 16, "num_microbatches": 512, "t_f": 1.0, "t_b": 1.0,
               "t_w": 1.0, "m_b": 1.0, "m_w": 1.0}
    data: dict[str, Any] = json.loads(solve(parse_profile(profile), "1f1b",
                                            "makespan").model_dump_json())
    return data


def _busy(server: Server) -> float:
    text = server.client.get("/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(('ppsched_in_progress{queue="solve"}',
                                   'ppsched_queue_depth{queue="solve"}')))


def _healthz_answers(server: Server) -> None:
    with httpx.Client(timeout=10) as client:  # its own connection: the probe's path
        assert client.get(f"{server.url}/healthz").status_code == 200


def test_a_huge_pack_runs_in_the_pool_and_is_stopped_at_its_time_budget(
        start_server: Any) -> None:
    server = start_server(workers=1, queue_size=0, retry_after_s=2,
                          call_time_budget_s=20)
    results: list[httpx.Response] = []
    thread = post_in_thread(server, "/v1/pack", HUGE_PACK, results)
    wait_until(lambda: _busy(server) == 1, 60, "the pack holding the only worker")
    workers = set(server.children())
    _healthz_answers(server)  # the pack's CPU is in the worker, not the event loop
    # The pool is full: another pack is refused at once, before its body is read.
    busy = server.client.post("/v1/pack", json=SMALL_PACK)
    assert_error(busy, 503, None, "solver pool is full", "retry in 2 s")
    assert busy.headers["retry-after"] == "2"
    unread = server.client.post("/v1/pack", content=b"{not json",
                                headers={"content-type": "application/json"})
    assert_error(unread, 503, None, "solver pool is full")
    thread.join(120)
    error = assert_error(results[0], 422, "time", "time budget of 20 s",
                         "PPSCHED_CALL_TIME_BUDGET_S")
    assert "PPSCHED_CALL_TIME_BUDGET_S" in error["accepted"]
    # Its worker was killed and replaced; the pool answers again.
    wait_until(lambda: len(server.children()) == 1 and set(server.children()) != workers,
               30, "the worker replaced")
    assert server.client.post("/v1/pack", json=SMALL_PACK).status_code == 200


def test_a_huge_advise_is_stopped_at_its_time_budget(start_server: Any) -> None:
    server = start_server(workers=1, call_time_budget_s=1)
    results: list[httpx.Response] = []
    thread = post_in_thread(server, "/v1/advise", HUGE_ADVISE, results)
    wait_until(lambda: _busy(server) == 1 or bool(results), 60, "the advise running")
    _healthz_answers(server)
    thread.join(120)
    assert_error(results[0], 422, "time", "time budget of 1 s")
    # Over a size limit: refused by name before any work.
    over = dict(HUGE_ADVISE, num_microbatches=257)
    assert_error(server.client.post("/v1/advise", json=over), 422, "num_microbatches",
                 "at most 256", "PPSCHED_MAX_ADVISE_MICROBATCHES")


def test_huge_schedules_to_simulate_and_validate_are_refused_by_name(
        start_server: Any) -> None:
    schedule = _big_schedule()
    # A size limit under the schedule's 16,384 ops: refused in the worker before parsing.
    small = start_server(max_check_ops=10_000)
    for path in ("/v1/simulate", "/v1/validate"):
        assert_error(small.client.post(path, json=schedule), 422, "ranks", "16384 ops",
                     "PPSCHED_MAX_CHECK_OPS")
        _healthz_answers(small)
    # A time budget shorter than the parse (0.15 s of CPU at least): the worker is
    # stopped, the answer names the budget, and the replacement answers the next one.
    hurried = start_server(call_time_budget_s=0.01, db="hurried.sqlite3")
    for path in ("/v1/simulate", "/v1/validate"):
        assert_error(hurried.client.post(path, json=schedule), 422, "time",
                     "PPSCHED_CALL_TIME_BUDGET_S")
        _healthz_answers(hurried)


def test_simulate_and_validate_answer_as_before_from_the_pool(start_server: Any) -> None:
    server = start_server()
    schedule = json.loads(server.client.post("/v1/schedules",
                                             json={"profile": EASY}).text)
    report = server.client.post("/v1/validate", json=schedule)
    assert report.status_code == 200 and report.json()["valid"] is True
    simulated = server.client.post("/v1/simulate", json=schedule)
    assert simulated.status_code == 200, simulated.text
    stored = server.client.get(simulated.json()["links"]["self"])
    assert stored.status_code == 200 and stored.json()["id"] == simulated.json()["id"]
    assert_error(server.client.post("/v1/simulate", content=b"\xff\xfe not json"), 422,
                 "body", "not JSON")


def test_a_pack_whose_client_disconnects_frees_its_worker(start_server: Any) -> None:
    server = start_server(workers=1, call_time_budget_s=300)
    body = json.dumps(HUGE_PACK).encode()
    raw = socket.create_connection(("127.0.0.1", server.port))
    raw.sendall(b"POST /v1/pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    wait_until(lambda: _busy(server) == 1, 60, "the pack running")
    before = set(server.children())
    raw.close()  # the client gives up
    # Free long before the pack's 55 s of CPU: its worker was replaced.
    wait_until(lambda: _busy(server) == 0, 30, "the worker freed")
    wait_until(lambda: set(server.children()) - before != set(), 30, "a fresh worker")
    assert server.client.post("/v1/pack", json=SMALL_PACK).status_code == 200


def _read_response(raw: socket.socket, timeout_s: float) -> tuple[bytes, bool]:
    """Everything the server sends until it closes (or `timeout_s`), and whether it
    closed."""
    raw.settimeout(timeout_s)
    data = b""
    try:
        while chunk := raw.recv(65536):
            data += chunk
    except TimeoutError:
        return data, False
    return data, True


def test_a_trickled_body_is_answered_408_and_closed(start_server: Any) -> None:
    server = start_server(body_timeout_s=3)
    raw = socket.create_connection(("127.0.0.1", server.port))
    raw.sendall(b"POST /v1/schedules HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                b"\r\nContent-Length: 1000\r\n\r\n{")
    stop = threading.Event()

    def trickle() -> None:  # one byte every 2 s, as the measured slow client
        while not stop.wait(2):
            try:
                raw.sendall(b" ")
            except OSError:
                return

    feeder = threading.Thread(target=trickle)
    feeder.start()
    try:
        data, closed = _read_response(raw, 60)
    finally:
        stop.set()
        feeder.join()
        raw.close()
    assert data.startswith(b"HTTP/1.1 408 "), data[:200]
    assert closed, "the connection stayed open after the 408"
    body = json.loads(data.split(b"\r\n\r\n", 1)[1])
    assert body["field"] == "body" and "PPSCHED_BODY_TIMEOUT_S" in body["message"]
    _healthz_answers(server)


def test_a_trickled_chunked_body_is_answered_408_too(start_server: Any) -> None:
    # No Content-Length: the body limit middleware reads it, under the same timeout.
    server = start_server(body_timeout_s=2)
    raw = socket.create_connection(("127.0.0.1", server.port))
    raw.sendall(b"POST /v1/validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                b"\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n")
    began = time.monotonic()
    data, closed = _read_response(raw, 60)
    raw.close()
    assert data.startswith(b"HTTP/1.1 408 "), data[:200]
    assert closed
    assert time.monotonic() - began >= 2  # not before the timeout


def test_a_body_sent_in_time_is_not_cut(start_server: Any) -> None:
    server = start_server(body_timeout_s=5)
    raw = socket.create_connection(("127.0.0.1", server.port))
    body = json.dumps({"profile": EASY}).encode()
    raw.sendall(b"POST /v1/schedules HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                b"\r\nConnection: close\r\nContent-Length: " + str(len(body)).encode()
                + b"\r\n\r\n" + body[:10])
    raw.sendall(body[10:])
    data, _ = _read_response(raw, 60)
    raw.close()
    assert data.startswith(b"HTTP/1.1 200 "), data[:300]


def test_extreme_values_are_a_422_not_a_500() -> None:
    # Found by schemathesis: act_bytes_per_token_hidden = 5e-324 made the advisor's
    # sensitivity probe divide by zero, a 500 from the worker.
    from functools import partial

    from ppsched.api.service.bounded import answer
    from ppsched.api.service.config import Settings
    from ppsched.api.service.routers.advise import _EXAMPLE, advise_json

    config = dict(_EXAMPLE, act_bytes_per_token_hidden=5e-324)  # the documented example
    status, text, key = answer(partial(advise_json, sensitivity=True),
                               json.dumps(config).encode(), Settings())
    assert status == 422 and key is None, text
    assert json.loads(text)["field"] == "body" and "ZeroDivisionError" in text
