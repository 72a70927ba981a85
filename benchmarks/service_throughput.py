"""Throughput of the service against the solver alone, side by side in one run.

Run: ``python -m benchmarks.service_throughput [--workers N] [--requests K] [--out DIR]``.

For each concurrency c (1, 4, 16, 64 by default):

- ``in-process``: the solve loop without HTTP: K distinct requests' solves
  (`api.service.worker.solve_body`, the function the service's workers run) through a
  process pool of N workers, at most c at once;
- ``service uncached``: the same number of distinct requests (another t_f each,
  so each is a real solve) posted to a real ``uvicorn`` server with N solver workers;
- ``service cached``: requests the service has already answered, from its store.

Reported: requests/s, p50 and p99 latency, and the server's main-process CPU per request
(utime + stime of its own process from /proc, not its workers'). The HTTP client is a
minimal keep-alive HTTP/1.1 client on asyncio streams in this process: it shares the
machine's CPUs with the server, which the notes say; it runs niced (``--nice``, after
the in-process loop's workers have started, so they keep the server's priority).
Prints a Markdown table and writes ``benchmarks/results/service_throughput.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from ppsched.api.service.worker import solve_body

from benchmarks.result_header import Started, result_header, start
from benchmarks.service_load import _free_port, start_server, stop_server

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("service_throughput.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "api/service", "api/cli", "profiles/gpt1.5b-p8-m32.json",
    "benchmarks/service_load.py", "benchmarks/service_throughput.py",
)
PROFILE = ROOT / "profiles" / "gpt1.5b-p8-m32.json"
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


@dataclass
class Row:
    mode: str
    concurrency: int
    requests: int
    wall_s: float
    latencies_ms: list[float]
    main_cpu_ms: float | None = None  # the server's main process, per request
    failures: int = 0

    @property
    def rate(self) -> float:
        return self.requests / self.wall_s

    def cells(self) -> list[str]:
        lat = sorted(self.latencies_ms)
        p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
        cpu = "-" if self.main_cpu_ms is None else f"{self.main_cpu_ms:.2f}"
        return [self.mode, str(self.concurrency), str(self.requests), f"{self.rate:.1f}",
                f"{statistics.median(lat):.1f}", f"{p99:.1f}", cpu, str(self.failures)]


def spec(profile: dict[str, Any], k: int) -> dict[str, Any]:
    """The k-th distinct request (its own t_f: a solve of its own; no memory limit, so
    one layout, as in the issue's 17.7 ms solve)."""
    return {"profile": {**profile, "memory_limit": None, "t_f": profile["t_f"] + k / 1000},
            "method": "heuristic", "objective": "cost", "time_limit_s": 10.0,
            "backend": "cpsat", "layouts": "", "ops": 0}


# The in-process loop.

async def in_process(pool: ProcessPoolExecutor, specs: list[dict[str, Any]],
                     concurrency: int) -> Row:
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    loop = asyncio.get_running_loop()

    async def one(k: int, item: dict[str, Any]) -> None:
        async with gate:
            began = time.perf_counter()
            outcome = await loop.run_in_executor(pool, solve_body, item, f"k{k}", 1)
            assert outcome[0] == "ok", outcome
            latencies.append((time.perf_counter() - began) * 1000)

    began = time.perf_counter()
    await asyncio.gather(*(one(k, item) for k, item in enumerate(specs)))
    return Row("in-process", concurrency, len(specs), time.perf_counter() - began, latencies)


# The service, through a minimal keep-alive HTTP/1.1 client.

class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def post(self, path: str, body: bytes) -> int:
        self.writer.write(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: bench\r\n"
                          b"Content-Type: application/json\r\nContent-Length: " +
                          str(len(body)).encode() + b"\r\n\r\n" + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        await self.reader.readexactly(length)
        return status


def main_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S  # utime, stime


async def through_service(port: int, pid: int, mode: str, bodies: list[bytes],
                          concurrency: int) -> Row:
    connections = [Connection(*await asyncio.open_connection("127.0.0.1", port))
                   for _ in range(concurrency)]
    free: asyncio.Queue[Connection] = asyncio.Queue()
    for connection in connections:
        free.put_nowait(connection)
    latencies: list[float] = []
    failures = 0

    async def one(body: bytes) -> None:
        nonlocal failures
        connection = await free.get()
        began = time.perf_counter()
        status = await connection.post("/v1/schedules", body)
        latencies.append((time.perf_counter() - began) * 1000)
        failures += status != 200
        free.put_nowait(connection)

    cpu_before = main_cpu_s(pid)
    began = time.perf_counter()
    await asyncio.gather(*(one(body) for body in bodies))
    wall = time.perf_counter() - began
    cpu_ms = (main_cpu_s(pid) - cpu_before) * 1000 / len(bodies)
    for connection in connections:
        connection.writer.close()
    return Row(mode, concurrency, len(bodies), wall, latencies, cpu_ms, failures)


async def run(args: argparse.Namespace) -> list[Row]:
    profile = json.loads(PROFILE.read_text())
    levels = [int(c) for c in args.concurrency.split(",")]
    rows: list[Row] = []
    folder = Path(tempfile.mkdtemp(prefix="ppsched-throughput-"))
    port = _free_port()
    server = start_server(port, folder, {"PPSCHED_WORKERS": str(args.workers),
                                         "PPSCHED_QUEUE_SIZE": "256"}, keep_alive_s=60)
    pool = ProcessPoolExecutor(args.workers, mp_context=get_context("spawn"))
    try:
        for _ in range(600):  # the server's start (state, not a guess: /healthz answers)
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                await asyncio.sleep(0.1)
        next_k = 10_000
        warm = [spec(profile, k) for k in range(args.workers * 2)]
        await in_process(pool, warm, args.workers)  # start the loop's workers
        # The client (this process, not the loop's workers started above nor the server)
        # yields the CPUs to the server: on two cores it would otherwise take half.
        os.nice(args.nice)
        await through_service(port, server.pid, "warm-up",
                              [json.dumps(w).encode() for w in warm], args.workers)
        for c in levels:
            # The same count of distinct solves, each mode its own (no cache between).
            direct = [spec(profile, next_k + k) for k in range(args.requests)]
            served = [spec(profile, next_k + args.requests + k) for k in range(args.requests)]
            next_k += 2 * args.requests
            bodies = [json.dumps({"profile": s["profile"], "method": "heuristic"}).encode()
                      for s in served]
            rows.append(await in_process(pool, direct, c))
            rows.append(await through_service(port, server.pid, "service uncached", bodies, c))
            repeats = (bodies * (args.cached_requests // len(bodies) + 1))[:args.cached_requests]
            rows.append(await through_service(port, server.pid, "service cached", repeats, c))
            print(*(" | ".join(r.cells()) for r in rows[-3:]), sep="\n", flush=True)
    finally:
        pool.shutdown()
        stop_server(server, 30.0)
    return rows


def table(rows: list[Row], args: argparse.Namespace, started: Started) -> str:
    head = ["mode", "concurrency", "requests", "req/s", "p50 ms", "p99 ms",
            "main-process CPU ms/req", "non-200"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    ratios = []
    for c in sorted({r.concurrency for r in rows}):
        direct = next(r for r in rows if r.concurrency == c and r.mode == "in-process")
        served = next(r for r in rows if r.concurrency == c and r.mode == "service uncached")
        ratios.append(f"c={c}: {served.rate / direct.rate:.2f}")
    command = (f"python -m benchmarks.service_throughput --workers {args.workers} --requests "
               f"{args.requests} --cached-requests {args.cached_requests} --concurrency "
               f"{args.concurrency} --nice {args.nice}")
    return "\n".join([
        *result_header(command, started=started, budget="wall (throughput and latency are "
                       "wall time; other work shares the CPUs, the HTTP client too)"),
        "Heuristic solves of profiles/gpt1.5b-p8-m32.json (each uncached request its own "
        f"t_f, no memory limit), {args.workers} solver workers both ways, the client "
        f"niced by {args.nice}, Python {platform.python_version()}.", "",
        *lines, "",
        f"Uncached service / in-process throughput: {', '.join(ratios)}.", "",
        targets(rows, started), ""])


# Issue 29's targets for the service against the solver alone.
UNCACHED_RATIO = 0.9  # at c=1 and c=16, on an idle machine
MAIN_CPU_MS = 1.5  # per uncached request
CACHED_RATE = 2000.0  # requests/s
IDLE_LOAD = 0.5  # a 1-minute load average under this counts as idle


def targets(rows: list[Row], started: Started) -> str:
    """Each target of issue 29 against this run: met, or missed and by how much."""

    def verdict(value: float, target: float, at_least: bool) -> str:
        met = value >= target if at_least else value <= target
        return "met" if met else f"missed by {abs(value - target) / target:.0%}"

    ratio_parts = []
    for c in (1, 16):
        direct = [r for r in rows if r.concurrency == c and r.mode == "in-process"]
        served = [r for r in rows if r.concurrency == c and r.mode == "service uncached"]
        if direct and served:
            ratio = served[0].rate / direct[0].rate
            ratio_parts.append(f"c={c} {ratio:.2f} "
                               f"({verdict(ratio, UNCACHED_RATIO, at_least=True)})")
    idle = "idle" if started.load < IDLE_LOAD else \
        f"not idle: load average {started.load:.2f} at the start, so the ratios do not decide it"
    cpu = [r.main_cpu_ms for r in rows if r.mode == "service uncached"
           and r.main_cpu_ms is not None]
    cached = max((r for r in rows if r.mode == "service cached"), key=lambda r: r.rate)
    return (f"Targets (issue 29): uncached service / in-process at least {UNCACHED_RATIO} at "
            f"c=1 and c=16 on an idle machine: {', '.join(ratio_parts)} ({idle}). "
            f"Main-process CPU per uncached request at most {MAIN_CPU_MS} ms: "
            f"{min(cpu):.2f} to {max(cpu):.2f} ms "
            f"({verdict(max(cpu), MAIN_CPU_MS, at_least=False)} at worst, "
            f"{verdict(min(cpu), MAIN_CPU_MS, at_least=False)} at best). "
            f"Cached at least {CACHED_RATE:.0f} req/s: {cached.rate:.1f} at "
            f"c={cached.concurrency} ({verdict(cached.rate, CACHED_RATE, at_least=True)}).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--requests", type=int, default=64, help="uncached, per level")
    parser.add_argument("--cached-requests", type=int, default=2000, help="per level")
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument("--nice", type=int, default=10,
                        help="niceness added to the client once the loop's workers run")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args()
    started = start()
    rows = asyncio.run(run(args))
    text = table(rows, args, started)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "service_throughput.md").write_text(text)


if __name__ == "__main__":
    main()
