"""Soak of the job queue: 1,000 small jobs through a real service, each in a process of
its own, with the fork server that starts them (PPSCHED_JOB_START_METHOD=forkserver, the
default) beside fresh interpreters (spawn) on a smaller batch of the same jobs.

Run: ``python -m benchmarks.job_soak [--jobs 1000] [--spawn-jobs 40] [--clients 4]``.
Per start method: the service starts as a user starts it (uvicorn, its own process, a
fresh SQLite database, ``PPSCHED_MAX_QUEUED_JOBS`` above the batch so that every job is
taken: the default of 16 answers 429 past it, by design), then ``--clients`` clients post
the batch at once, each its share: heuristic solves of the paper's p=8, m=24 profile at
distinct memory limits (distinct requests, so none is coalesced into another's job).
The run waits on the jobs' states (``GET /v1/jobs?status=queued&status=running``) until
none is left, then reads every job: each must be ``done`` with a schedule. Reported:
jobs accepted and refused, the time to submit them, the time until the last one ended,
jobs per second, each job's time from submission to end (median, 95th percentile, the
longest), the server's resident memory (its process and all its children) at start,
its peak while the jobs ran, and after them, and the service's CPU per job. Writes
``benchmarks/results/job_soak.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.process_tree import tree_cpu_s
from benchmarks.result_header import command_line, result_header, start
from benchmarks.service_load import (
    _free_port,
    start_server,
    stop_server,
    tree_rss_mb,
    wait_healthy,
)

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("job_soak.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "api/service", "profiles/gpt1.5b-p8-m24.json", "benchmarks/job_soak.py",
    "benchmarks/service_load.py",
)
PROFILE = ROOT / "profiles" / "gpt1.5b-p8-m24.json"
FINAL = ("done", "failed", "cancelled")


@dataclass
class Soak:
    """One batch through one service."""

    method: str
    jobs: int
    accepted: int = 0
    refused: dict[int, int] | None = None
    submit_s: float = 0.0
    drain_s: float = 0.0
    statuses: dict[str, int] | None = None
    latencies: list[float] | None = None
    rss_start_mb: float = 0.0
    rss_peak_mb: float = 0.0
    rss_end_mb: float = 0.0
    cpu_s: float = 0.0

    @property
    def jobs_per_s(self) -> float:
        return self.accepted / self.drain_s if self.drain_s > 0 else 0.0


def job_bodies(count: int) -> list[dict[str, Any]]:
    """`count` distinct heuristic solves: the same profile at distinct memory limits, all
    at or above 1F1B's (p * m_b = 8 for this profile), so each has a schedule."""
    profile = json.loads(PROFILE.read_text())
    return [{"profile": {**profile, "memory_limit": round(8.0 + 0.001 * i, 3)},
             "method": "heuristic"} for i in range(count)]


async def soak(url: str, server: subprocess.Popen[bytes], method: str, count: int,
               clients: int) -> Soak:
    result = Soak(method, count, refused={}, statuses={})
    bodies = job_bodies(count)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=60.0, limits=limits) as client:
        await wait_healthy(client, server)
        result.rss_start_mb = tree_rss_mb(server.pid)
        cpu_before = tree_cpu_s(server.pid)
        ids: list[str] = []
        began = time.monotonic()

        async def submit(share: list[dict[str, Any]]) -> None:
            for body in share:
                response = await client.post("/v1/jobs", json=body)
                if response.status_code == 202:
                    ids.append(response.json()["id"])
                else:
                    assert result.refused is not None
                    result.refused[response.status_code] = \
                        result.refused.get(response.status_code, 0) + 1

        await asyncio.gather(*(submit(bodies[k::clients]) for k in range(clients)))
        result.submit_s = time.monotonic() - began
        result.accepted = len(ids)
        peak = tree_rss_mb(server.pid)
        while True:  # on the jobs' states, not on a guess of how long they take
            left = await client.get("/v1/jobs", params={"status": ["queued", "running"],
                                                        "limit": 1000})
            peak = max(peak, tree_rss_mb(server.pid))
            if not left.json()["jobs"]:
                break
            await asyncio.sleep(0.25)
        result.drain_s = time.monotonic() - began
        result.rss_peak_mb = peak
        result.cpu_s = tree_cpu_s(server.pid) - cpu_before
        latencies = []
        for job_id in ids:
            job = (await client.get(f"/v1/jobs/{job_id}")).json()
            assert result.statuses is not None
            result.statuses[job["status"]] = result.statuses.get(job["status"], 0) + 1
            if job["status"] == "done" and not job["schedule_id"]:
                result.statuses["done without a schedule"] = \
                    result.statuses.get("done without a schedule", 0) + 1
            latencies.append(job["updated"] - job["created"])
        result.latencies = latencies
        result.rss_end_mb = tree_rss_mb(server.pid)
    return result


def run_one(method: str, count: int, clients: int, job_workers: int) -> tuple[Soak, str]:
    port = _free_port()
    settings = {"PPSCHED_JOB_START_METHOD": method, "PPSCHED_JOB_WORKERS": str(job_workers),
                "PPSCHED_MAX_QUEUED_JOBS": str(count + 100),
                "PPSCHED_QUOTA_QUEUED_JOBS": str(count + 100)}
    with tempfile.TemporaryDirectory(prefix="ppsched-soak-") as folder:
        server = start_server(port, Path(folder), settings)
        try:
            result = asyncio.run(soak(f"http://127.0.0.1:{port}", server, method, count,
                                      clients))
        finally:
            stop_server(server, 30.0)
            log = (Path(folder) / "server.log").read_text(errors="replace")
    errors = [line for line in log.splitlines() if "ERROR" in line or "Traceback" in line]
    return result, "; ".join(errors[-3:])


def _row(s: Soak) -> str:
    lat = sorted(s.latencies or [0.0])
    p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))]
    refused = ", ".join(f"{n} x {code}" for code, n in sorted((s.refused or {}).items()))
    statuses = ", ".join(f"{n} {k}" for k, n in sorted((s.statuses or {}).items()))
    return (f"| {s.method} | {s.jobs} | {s.accepted} | {refused or 'none'} | {statuses} | "
            f"{s.submit_s:.1f} | {s.drain_s:.1f} | {s.jobs_per_s:.2f} | "
            f"{statistics.median(lat):.2f} / {p95:.2f} / {lat[-1]:.2f} | "
            f"{s.rss_start_mb:.0f} / {s.rss_peak_mb:.0f} / {s.rss_end_mb:.0f} | "
            f"{1000 * s.cpu_s / max(s.accepted, 1):.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000, help="jobs of the forkserver batch")
    parser.add_argument("--spawn-jobs", type=int, default=40,
                        help="jobs of the spawn batch (a fresh interpreter per job; 0: none)")
    parser.add_argument("--clients", type=int, default=4, help="clients posting at once")
    parser.add_argument("--job-workers", type=int, default=1,
                        help="PPSCHED_JOB_WORKERS (jobs that run at once; default 1, the "
                        "service's)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args()
    started = start()
    runs = [("forkserver", args.jobs)] + \
        ([("spawn", args.spawn_jobs)] if args.spawn_jobs > 0 else [])
    results, logs = [], []
    for method, count in runs:
        result, errors = run_one(method, count, args.clients, args.job_workers)
        results.append(result)
        if errors:
            logs.append(f"- {method}: the server logged: `{errors}`")
        print(_row(result), flush=True)
    by = {r.method: r for r in results}
    lines = list(result_header(command_line("benchmarks.job_soak"), started=started,
                               budget="wall (jobs per second and times are wall time on a "
                               "shared machine)"))
    lines += [
        "",
        f"Heuristic jobs of `{PROFILE.relative_to(ROOT)}` at distinct memory limits, "
        f"posted by {args.clients} clients at once; PPSCHED_JOB_WORKERS={args.job_workers}; "
        "the queue limits raised above the batch. Job time: submission to end, from the "
        "job's own `created` and `updated`. RSS: the server and all its children "
        "(start / peak while the jobs ran / after). CPU per job: the server process and "
        "its children, user + system, over the batch.",
        "",
        "| start method | jobs | accepted | refused | ended | submit s | all ended s "
        "| jobs/s | job time s: median / p95 / max | RSS MB: start / peak / end "
        "| CPU ms per job |",
        "| --- | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        *[_row(r) for r in results],
        "",
    ]
    if "spawn" in by and by["spawn"].jobs_per_s > 0:
        lines += [f"Forkserver / spawn, jobs per second: "
                  f"{by['forkserver'].jobs_per_s / by['spawn'].jobs_per_s:.1f}x "
                  "(the same jobs and settings, one run after the other).", ""]
    lines += logs
    text = "\n".join(lines) + "\n"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "job_soak.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
