"""Throughput of `ppsched sweep`: rows per second with 1 and 2 local workers, against the
same solves called directly in one process, side by side in one run.

Run: ``python -m benchmarks.sweep_scale [--grid FILE] [--out DIR] [--rounds N]``. The grid
(``benchmarks/sweep_scale.yaml``, 1,080 heuristic configurations) is expanded once; then,
in each of N rounds (the best round of each is reported; the machine may be shared),
(1) a plain loop parses each resolved profile and calls ``solve`` in this process, (2) the
sweep runner solves it with ``--jobs 1`` and (3) with ``--jobs 2``, each writing a fresh
JSONL file. The overhead per row is (runner with 1 worker - direct loop) / rows: process
start-up, pickling, the JSONL write with fsync, and the bookkeeping. Prints a Markdown
table and writes ``benchmarks/results/sweep_scale.md``.
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

from ppsched.api.sweep.expand import expand_grid
from ppsched.api.sweep.grid import load_grid
from ppsched.api.sweep.records import read_rows
from ppsched.api.sweep.runner import run_sweep
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.solving.entry import solve

from benchmarks.result_header import command_line, result_header, start

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("sweep_scale.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "api/sweep", "benchmarks/sweep_scale.yaml", "benchmarks/sweep_scale.py",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", default=str(ROOT / "benchmarks" / "sweep_scale.yaml"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    started = start()

    began = time.perf_counter()
    tasks = expand_grid(load_grid(args.grid))
    expand_s = time.perf_counter() - began
    count = len(tasks)

    solve(parse_profile(tasks[0].profile), tasks[0].method)  # imports and caches: warm up
    direct: list[float] = []
    timings: dict[int, list[float]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            began = time.perf_counter()
            for task in tasks:
                solve(parse_profile(task.profile), task.method, task.objective)
            direct.append(time.perf_counter() - began)
            for jobs in timings:
                out = Path(tmp) / f"round{round_}-jobs{jobs}.jsonl"
                began = time.perf_counter()
                outcome = run_sweep(tasks, out, jobs=jobs, progress=False)
                timings[jobs].append(time.perf_counter() - began)
                assert outcome.done == count and len(read_rows(out)) == count
    direct_s = min(direct)
    lines = [
        *result_header(command_line("benchmarks.sweep_scale"), started=started,
                       budget="wall (every figure is wall time on a shared machine)"),
        f"Sweep throughput: {count} heuristic rows of `{Path(args.grid).name}` "
        f"(grid expanded and every profile resolved in {expand_s:.2f} s); Python "
        f"{platform.python_version()}. Runner times include starting the worker processes "
        f"and writing the JSONL rows (flush + fsync each). Best of {args.rounds} rounds.",
        "",
        "| how | wall s | rows/s | vs direct | overhead per row (ms) |",
        "|---|---|---|---|---|",
        f"| direct `solve()` loop, one process | {direct_s:.2f} | {count / direct_s:.1f} "
        "| 1.00x | - |",
    ]
    for jobs, runs in timings.items():
        seconds = min(runs)
        overhead_ms = (seconds - direct_s) / count * 1000
        lines.append(f"| `ppsched sweep --jobs {jobs}` | {seconds:.2f} | {count / seconds:.1f} "
                     f"| {direct_s / seconds:.2f}x | {overhead_ms:+.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "sweep_scale.md").write_text(text)


if __name__ == "__main__":
    main()
