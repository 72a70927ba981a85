"""Load test of the HTTP service: a real uvicorn server, driven from this process on loopback.

Run: ``python -m benchmarks.service_load [--out DIR] [--saturation N] [--rounds R] [...]``.
Starts the service as its own process (free port, temporary SQLite database), then posts
heuristic solves of the paper's p=8, m=32 profile (``profiles/gpt1.5b-p8-m32.json``) with
an async httpx client, in phases:

- ``solve c=1``: distinct requests one at a time (each a real solve: its memory limit
  differs), the latency of one solve through the whole stack;
- ``solve c=4``: distinct requests, four at a time, as many as the pool and its queue take;
- ``cached c=16``: the ``solve c=4`` requests again, repeated, which the service answers
  from its cache;
- ``burst N``: rounds of N distinct requests at once, more than the worker pool and its
  queue admit, to see refusals (429/503), no crash, and whether memory stays steady.

After the last phase the server must still answer ``/healthz`` and solve one more
request. The server's resident memory (its process and children, from /proc) is sampled
after each phase. Prints a Markdown table and writes ``benchmarks/results/service_load.md``.
The whole run takes well under two minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks.process_tree import family
from benchmarks.result_header import command_line, result_header, start

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("service_load.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "api/service", "api/cli", "profiles/gpt1.5b-p8-m32.json",
    "benchmarks/service_load.py",
)
PROFILE = ROOT / "profiles" / "gpt1.5b-p8-m32.json"
REFUSED = (429, 503)
POLL_S = 0.05


@dataclass
class Phase:
    """What one phase sent and got back."""

    name: str
    concurrency: int
    wall_s: float = 0.0
    ok_ms: list[float] = field(default_factory=list)  # latencies of 2xx answers
    refused: dict[int, int] = field(default_factory=dict)  # 429 and 503, by status
    errors: dict[str, int] = field(default_factory=dict)  # any other status or exception
    rss_mb: float = 0.0  # the server's, after the phase

    @property
    def requests(self) -> int:
        return len(self.ok_ms) + sum(self.refused.values()) + sum(self.errors.values())


# The server.

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_settings(args: argparse.Namespace) -> dict[str, str]:
    """The service's settings for this run (environment variables, api/service/config.py)."""
    return {"PPSCHED_WORKERS": str(args.workers), "PPSCHED_QUEUE_SIZE": str(args.queue_size)}


def start_server(port: int, folder: Path, settings: dict[str, str], *,
                 checkout: Path = ROOT, keep_alive_s: float | None = None,
                 ) -> subprocess.Popen[bytes]:
    """The service as a user starts it: uvicorn in its own process, a fresh database.

    Args:
        settings: environment variables for the server (its settings, and PYTHONPATH for
            a `checkout` other than this one).
        checkout: the folder it runs from.
        keep_alive_s: uvicorn's keep-alive (None: its default), for a client whose
            connections live through a run.
    """
    env = {**os.environ, **settings, "PPSCHED_DB_PATH": str(folder / "ppsched.sqlite3")}
    log = (folder / "server.log").open("wb")
    keep_alive = [] if keep_alive_s is None else ["--timeout-keep-alive", f"{keep_alive_s:g}"]
    return subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "ppsched.api.service.main:app_from_env",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", *keep_alive],
        cwd=checkout, env=env, stdout=log, stderr=subprocess.STDOUT)


def stop_server(server: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """SIGTERM (the service hands its jobs back and drains), then SIGKILL past
    `timeout_s`."""
    server.terminate()
    try:
        server.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


async def wait_healthy(client: httpx.AsyncClient, server: subprocess.Popen[bytes],
                       timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode}")
        try:
            if (await client.get("/healthz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server did not answer /healthz in {timeout_s:g} s")
        await asyncio.sleep(0.1)


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants, in MiB (Linux /proc)."""
    total_kb = 0
    for member in family(pid):
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except OSError:
            continue
    return total_kb / 1024


# The client.

def request_body(profile: dict[str, Any], memory_limit: float) -> dict[str, Any]:
    """A heuristic solve of `profile` at `memory_limit` (distinct limits, distinct solves)."""
    return {"profile": {**profile, "memory_limit": memory_limit}, "method": "heuristic",
            "objective": "cost"}


async def solve_once(client: httpx.AsyncClient, body: dict[str, Any]) -> int | str:
    """Post one solve and, if it is queued as a job, wait for it; the final status."""
    response = await client.post("/v1/schedules", json=body)
    if response.status_code != 202:
        return response.status_code
    job_url = response.json()["links"]["self"]
    while True:
        await asyncio.sleep(POLL_S)
        job = await client.get(job_url)
        if job.status_code != 200:
            return job.status_code
        state = job.json()["status"]
        if state == "done":
            return 200
        if state in ("failed", "cancelled"):
            return f"job {state}"


async def run_phase(client: httpx.AsyncClient, name: str, bodies: list[dict[str, Any]],
                    concurrency: int, server_pid: int) -> Phase:
    phase = Phase(name, concurrency)
    gate = asyncio.Semaphore(concurrency)

    async def one(body: dict[str, Any]) -> None:
        async with gate:
            began = time.perf_counter()
            try:
                outcome: int | str = await solve_once(client, body)
            except httpx.HTTPError as exc:
                outcome = type(exc).__name__
            elapsed_ms = (time.perf_counter() - began) * 1000
        if isinstance(outcome, int) and 200 <= outcome < 300:
            phase.ok_ms.append(elapsed_ms)
        elif isinstance(outcome, int) and outcome in REFUSED:
            phase.refused[outcome] = phase.refused.get(outcome, 0) + 1
        else:
            phase.errors[str(outcome)] = phase.errors.get(str(outcome), 0) + 1

    began = time.perf_counter()
    await asyncio.gather(*(one(body) for body in bodies))
    phase.wall_s = time.perf_counter() - began
    phase.rss_mb = tree_rss_mb(server_pid)
    return phase


async def run(args: argparse.Namespace, server: subprocess.Popen[bytes],
              base: str) -> tuple[list[Phase], list[str]]:
    profile = json.loads(PROFILE.read_text())
    floor = float(profile["memory_limit"])  # 1p: p*m_b, the least the heuristic accepts
    # A pool a little larger than the burst: the client must not be the bottleneck. Idle
    # connections are dropped before uvicorn's 5 s keep-alive timeout closes them, so a
    # request never races the server's close (a client artefact, not the service's).
    limits = httpx.Limits(max_connections=args.saturation + 8,
                          max_keepalive_connections=args.saturation + 8, keepalive_expiry=2.0)
    async with httpx.AsyncClient(base_url=base, timeout=60.0, limits=limits) as client:
        await wait_healthy(client, server)
        notes = [f"server RSS at start: {tree_rss_mb(server.pid):.1f} MB; load average at "
                 f"start {_load()} (other work on the machine shares its CPUs)"]
        # Distinct limits 8.000, 8.001, ...: every one a separate solve and cache entry.
        step = 0.001
        limit_of = (floor + step * k for k in range(1_000_000))
        # Warm-up, not in the table: the first solves start the worker processes.
        start_up = await run_phase(client, "warm-up", [request_body(profile, next(limit_of))
                                                       for _ in range(args.workers)],
                                   args.workers, server.pid)
        notes.append(f"warm-up: {start_up.requests} solves at once took "
                     f"{start_up.wall_s * 1000:.0f} ms (worker start-up), "
                     f"{len(start_up.ok_ms)} 2xx")
        phases = [await run_phase(client, "solve c=1", [request_body(profile, next(limit_of))
                                                        for _ in range(args.distinct)],
                                  1, server.pid)]
        distinct = [request_body(profile, next(limit_of)) for _ in range(args.distinct * 2)]
        phases.append(await run_phase(client, "solve c=4", distinct, 4, server.pid))
        phases.append(await run_phase(client, "cached c=16", distinct * args.repeats, 16,
                                      server.pid))
        for round_ in range(1, args.rounds + 1):
            burst = [request_body(profile, next(limit_of)) for _ in range(args.saturation)]
            phases.append(await run_phase(client, f"burst {round_}", burst, args.saturation,
                                          server.pid))
        # Still up and still solving?
        health = await client.get("/healthz")
        after = await solve_once(client, request_body(profile, next(limit_of)))
        alive = "running" if server.poll() is None else f"EXITED {server.returncode}"
        notes.append(f"load average at the end: {_load()}")
        notes.append(f"after the bursts: server process {alive}, /healthz "
                     f"{health.status_code}, one more solve {after}")
    return phases, notes


# Report.

def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def markdown(phases: list[Phase], notes: list[str], settings: str) -> str:
    head = ["phase", "requests", "concurrency", "throughput req/s", "p50 ms", "p99 ms", "2xx",
            "429/503", "other errors", "RSS MB"]
    lines = [
        f"Service load (`python -m benchmarks.service_load`): heuristic solves of "
        f"{PROFILE.stem} against uvicorn on loopback; machine: {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}; {settings}. "
        "Throughput counts 2xx answers per second of the phase's wall time; latencies are "
        "of 2xx answers; RSS is the server's (process and children) after the phase.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for p in phases:
        errors = ", ".join(f"{k}: {v}" for k, v in sorted(p.errors.items())) or "0"
        refused = ", ".join(f"{v} ({k})" for k, v in sorted(p.refused.items())) or "0"
        lines.append("| " + " | ".join([
            p.name, str(p.requests), str(p.concurrency),
            f"{len(p.ok_ms) / p.wall_s:.1f}", f"{_percentile(p.ok_ms, 50):.1f}",
            f"{_percentile(p.ok_ms, 99):.1f}", str(len(p.ok_ms)), refused, errors,
            f"{p.rss_mb:.1f}"]) + " |")
    lines += [""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    parser.add_argument("--distinct", type=int, default=24, help="requests of the c=1 phase "
                        "(the c=4 phase sends twice as many)")
    parser.add_argument("--repeats", type=int, default=4, help="times the cached phase "
                        "repeats the c=4 requests")
    parser.add_argument("--saturation", type=int, default=128,
                        help="distinct requests sent at once in each burst")
    parser.add_argument("--rounds", type=int, default=5, help="bursts")
    parser.add_argument("--workers", type=int, default=2, help="the server's solve workers")
    parser.add_argument("--queue-size", type=int, default=8,
                        help="solves that may wait for a worker before the server says 503")
    args = parser.parse_args()
    started = start()

    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="ppsched-load-") as folder:
        settings = server_settings(args)
        server = start_server(port, Path(folder), settings)
        try:
            phases, notes = asyncio.run(run(args, server, f"http://127.0.0.1:{port}"))
        finally:
            stop_server(server)
            log = (Path(folder) / "server.log").read_text(errors="replace").strip()
    text = "\n".join(result_header(command_line("benchmarks.service_load"), started=started,
                                    budget="wall (throughput and latency are wall time)"))
    text += "\n" + markdown(phases, notes, ", ".join(f"{k}={v}" for k, v in settings.items()))
    if log:
        tail = log.splitlines()[-5:]
        text += "- last lines of the server's log:\n" + "".join(f"  `{x}`\n" for x in tail)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "service_load.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
