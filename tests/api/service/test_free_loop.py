"""The event loop stays free: views are drawn in worker processes, once, and identical
concurrent requests share one solve (real server processes)."""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests.api.service.conftest import EASY, Server, wait_for_job

BIG = {**EASY, "num_ranks": 64, "num_microbatches": 512, "memory_limit": None}


def _gauge(server: Server, text: str) -> float:
    """The sum of a metric's samples whose line starts with `text`."""
    body = server.client.get("/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
               if line.startswith(text))


def _in_flight(server: Server) -> float:
    return _gauge(server, 'ppsched_in_progress{queue="solve"}') + \
        _gauge(server, 'ppsched_queue_depth{queue="solve"}')


def test_big_svg_requests_leave_the_event_loop_free(start_server: Any) -> None:
    """Eight concurrent .svg requests of a p=64, m=512 schedule: the drawing runs in the
    worker pool (the server's in-flight gauge counts it), once, while /healthz keeps
    answering. Judged by states, not by wall-clock latency (a loaded machine stretches
    any latency; the 100 ms figure of the issue is a benchmark's matter)."""
    server = start_server(workers=2, queue_size=8)
    # p = 64, m = 512: 98,304 ops, over the synchronous budget, so a job.
    accepted = server.client.post("/v1/jobs", json={"profile": BIG, "method": "1f1b"}).json()
    job = wait_for_job(server.client, accepted["id"], ("done", "failed"), timeout_s=300)
    assert job["status"] == "done", job
    url = f"{server.url}/v1/schedules/{job['schedule_id']}.svg"

    def fetch() -> httpx.Response:
        with httpx.Client(timeout=300) as client:
            return client.get(url)

    with ThreadPoolExecutor(8) as threads:
        futures = [threads.submit(fetch) for _ in range(8)]
        deadline = time.monotonic() + 120
        while _in_flight(server) < 1:
            assert time.monotonic() < deadline and not all(f.done() for f in futures)
        answered = 0
        while _in_flight(server) >= 1:
            assert server.client.get("/healthz").status_code == 200
            answered += 1
        responses = [future.result() for future in futures]
    # The loop answered while the drawing was in flight in the pool.
    assert answered >= 1
    bodies = {response.text for response in responses}
    assert all(r.status_code == 200 for r in responses) and len(bodies) == 1
    svg = bodies.pop()
    assert svg.lstrip().startswith(("<svg", "<?xml")) and len(svg) > 1_000_000
    # Drawn once: later requests come from the store, with no worker involved.
    assert _in_flight(server) == 0
    assert fetch().text == svg and _in_flight(server) == 0


def test_identical_concurrent_requests_share_one_solve(start_server: Any) -> None:
    server = start_server(workers=1, queue_size=2)
    request = {"profile": {**EASY, "num_microbatches": 6, "t_f": 1.25}, "method": "zb-h1"}
    solves = re.escape('ppsched_solves_total{method="zb-h1"')
    before = _solves(server, solves)

    def post(_: int) -> httpx.Response:
        with httpx.Client(timeout=120) as client:
            return client.post(f"{server.url}/v1/schedules", json=request)

    with ThreadPoolExecutor(32) as threads:
        responses = list(threads.map(post, range(32)))
    assert [r.status_code for r in responses] == [200] * 32, [r.text for r in responses]
    assert len({r.json()["id"] for r in responses}) == 1
    # 32 requests, one solve (more than the pool's capacity of 3 would allow otherwise).
    assert _solves(server, solves) - before == 1


def _solves(server: Server, pattern: str) -> float:
    body = server.client.get("/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
               if re.match(pattern, line))
