"""`--method ilp` where memory binds below 1F1B's, one chunk (issue 11's limit-6 target).

Run: ``python -m benchmarks.ilp_tight_memory [--runs N]``. Two parts:

- **wall time**: the README's command ``ppsched solve profiles/gpt1.5b-p8-m24.json
  --memory-limit 6 --method ilp --time-limit 30 --layouts 1`` (two CP-SAT workers, as
  the product runs it) `--runs` times through the real command line, each row with the
  load average just before it: cost, solver bound, gap, status, wall time. Target: cost
  <= 1542.6 (1% above the FIFO optimum 1527.3) with a proof or a gap under 2%.
- **deterministic time**: `solver.cpsat.solve_cpsat_phased` from the single-chunk
  heuristic, CP-SAT on one worker, seed 0, 10 s of its *deterministic* time, on the
  limit-6 profile and a few others where memory binds (these figures repeat exactly on
  any load).

Writes ``benchmarks/results/ilp_tight_memory.md``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from ppsched.solver.exact.cpsat import solve_cpsat_phased
from ppsched.solver.model.profile import load_profile
from ppsched.solver.solving.pipeline import heuristic_orders

from benchmarks.bubble_table import with_limit_multiple
from benchmarks.markdown_table import markdown_table
from benchmarks.result_header import command_line, result_header, start

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("ilp_tight_memory.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "solver/exact", "api/cli", "profiles/gpt1.5b-p8-m24.json",
    "profiles/gpt1.5b-p8-m32.json", "profiles/gpt6.2b-p8-m24.json",
    "benchmarks/bubble_table.py", "benchmarks/ilp_tight_memory.py",
)
RESULTS = ROOT / "benchmarks" / "results"
COMMAND = ("solve profiles/gpt1.5b-p8-m24.json --memory-limit 6 --method ilp "
           "--time-limit 30 --layouts 1")
TARGET_COST, TARGET_GAP = 1542.6, 0.02
# (profile, memory limit as a multiple of the profile's own limit): gpt1.5b-p8-m24 at 0.75
# is the limit-6 target; the others bind below 1F1B's memory too.
DETERMINISTIC = (("gpt1.5b-p8-m24", 0.75), ("gpt1.5b-p8-m24", 0.5),
                 ("gpt6.2b-p8-m24", 0.75), ("gpt6.2b-p8-m24", 0.5),
                 ("gpt1.5b-p8-m32", 0.75), ("hetero-p8-m32", 0.375))
BUDGET = 10.0

_FIGURE = r"([0-9.]+)"


def run_command() -> dict[str, object]:
    """One run of `COMMAND` through the command line; the figures it printed."""
    load = os.getloadavg()[0]
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ppsched.api.cli", *COMMAND.split()], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    wall = time.perf_counter() - began
    out = done.stdout
    status = re.search(r"^method\s+\S+ \((\w+)\)", out, re.MULTILINE)
    cost = re.search(rf"^cost\s+{_FIGURE}", out, re.MULTILINE)
    bound = re.search(rf"^solver bound\s+{_FIGURE}", out, re.MULTILINE)
    assert status and cost and bound, out
    value, proven = float(cost.group(1)), float(bound.group(1))
    gap = (value - proven) / value
    return {"load before": f"{load:.2f}", "cost": f"{value:.1f}", "solver bound": f"{proven:.1f}",
            "gap": f"{gap:.2%}", "status": status.group(1), "wall s": f"{wall:.1f}",
            "target met": "yes" if value <= TARGET_COST and (
                status.group(1) == "optimal" or gap < TARGET_GAP) else "no"}


def run_deterministic(name: str, multiple: float) -> dict[str, object]:
    original = load_profile(ROOT / "profiles" / f"{name}.json")
    base = original.memory_limit
    assert isinstance(base, float), "the profiles here have one scalar limit"
    profile = with_limit_multiple(original, multiple)
    problem = profile.problem
    orders, _, heuristic = heuristic_orders(problem)
    began = time.perf_counter()
    result = solve_cpsat_phased(problem, orders, time_limit_s=100 * BUDGET + 60, workers=1,
                                seed=0, deterministic_s=BUDGET)
    assert result.objective is not None
    return {"config": name, "x profile limit": f"{multiple:g}", "limit": f"{multiple * base:g}",
            "heuristic": f"{heuristic:.1f}", "ilp": f"{result.objective:.1f}",
            "solver bound": f"{result.bound:.1f}", "gap": f"{result.gap:.2%}",
            "status": result.status, "wall s": f"{time.perf_counter() - began:.1f}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5, help="wall-time runs of the command")
    args = parser.parse_args()
    started = start()
    began = time.perf_counter()
    wall_rows = []
    for index in range(args.runs):
        wall_rows.append(run_command())
        print("run", index + 1, wall_rows[-1], flush=True)
    det_rows = []
    for name, multiple in DETERMINISTIC:
        det_rows.append(run_deterministic(name, multiple))
        print(det_rows[-1], flush=True)
    met = sum(r["target met"] == "yes" for r in wall_rows)
    lines = [
        *result_header(command_line("benchmarks.ilp_tight_memory"), started=started,
                       budget="wall (the first table: `--time-limit 30`, by design; the "
                       f"second: CP-SAT deterministic time {BUDGET:g})"),
        f"`--method ilp` where memory binds, one chunk; {time.perf_counter() - began:.0f} s "
        "of wall time in all.",
        "",
        f"Wall time: `ppsched {COMMAND}` (two CP-SAT workers), run {args.runs} times; the "
        f"target (cost <= {TARGET_COST}, proven or a gap under {TARGET_GAP:.0%}) was met "
        f"{met} times of {args.runs}. The solver bound holds over FIFO orders.",
        "",
        *markdown_table(wall_rows),
        "",
        f"Deterministic time: from the single-chunk heuristic, CP-SAT on one worker, seed "
        f"0, {BUDGET:g} s of its deterministic time (repeats exactly on any load); the "
        "limit as a multiple of the profile's own (p * m_b for the gpt profiles; "
        "hetero-p8-m32's is about 2p).",
        "",
        *markdown_table(det_rows),
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ilp_tight_memory.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
