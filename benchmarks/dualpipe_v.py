"""DualPipe-V under the DESIGN.md cost model: the DualPipe README's closed forms, and
DualPipe-V against ZB-V on the shared profiles cut into a V.

Run: ``python -m benchmarks.dualpipe_v [--profiles DIR] [--out DIR]``. Writes
``benchmarks/results/dualpipe_v.md`` (the README's "DualPipe-V" block is a copy of it).

Table 1, identical stages, t_comm = 0: the measured bubble (cost minus the busiest
rank's op time) beside the README's ``(PP/2-1)(F&B + B - 3W)``, in our terms
``(p-1)(FB + t_b - 2 t_w)`` with ``FB = overlap * (t_f + t_b + t_w)`` (its B is a full
backward, t_b + t_w), and the peak activation memory beside its ``PP+1`` (PP = 2p stages).

Table 2: each ``gpt*`` profile cut into two chunks per rank (DESIGN.md section 2: half
the times and memory per stage, the same t_comm), no memory limit; the step time (cost) of
DualPipe-V at several `overlap` values beside ZB-V's, and both peak memories.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ppsched.solver.generators import get_generator
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.result import Metrics
from ppsched.solver.sim.simulator import validate

from benchmarks.result_header import command_line, result_header, start

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("dualpipe_v.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/generators", "profiles/gpt*.json",
    "benchmarks/dualpipe_v.py",
)
GRID_TIMES = [(1.0, 1.0, 0.5), (1.0, 1.0, 1.0), (2.0, 1.0, 1.0), (18.5, 18.1, 9.3)]
OVERLAPS = (1.0, 0.8, 0.6)
# Measured, not derived: the Zero Bubble paper profiled these (its Table 9).
MEASURED = ("gpt1.5b", "gpt28.3b")


def _metrics(data: dict[str, Any], method: str) -> Metrics:
    problem = parse_profile(data).problem
    metrics = validate(problem, get_generator(method)(problem)).metrics
    assert metrics is not None
    return metrics


def closed_form_rows() -> list[str]:
    rows = ["| p | m | t_f, t_b, t_w | overlap | bubble | README form | equal | "
            "peak memory / m_b | PP+1 |", "|---|---|---|---|---|---|---|---|---|"]
    for p in (2, 4, 8):
        for m in (2 * p, 4 * p):
            for t_f, t_b, t_w in GRID_TIMES:
                for overlap in (1.0, 0.8):
                    metrics = _metrics({
                        "num_ranks": p, "num_microbatches": m, "num_chunks": 2,
                        "placement": "v", "t_f": t_f, "t_b": t_b, "t_w": t_w, "m_b": 1.0,
                        "m_w": 1.0, "overlap": overlap}, "dualpipe-v")
                    bubble = metrics.cost - max(metrics.busy)
                    form = (p - 1) * (overlap * (t_f + t_b + t_w) + t_b - 2 * t_w)
                    rows.append(
                        f"| {p} | {m} | {t_f:g}, {t_b:g}, {t_w:g} | {overlap:g} | "
                        f"{bubble:.4g} | {form:.4g} | "
                        f"{'yes' if abs(bubble - form) < 1e-9 else 'no'} | "
                        f"{max(metrics.peak_memory):g} | {2 * p + 1} |")
    return rows


def profile_rows(profiles: Path) -> list[str]:
    head = " | ".join(f"DualPipe-V {o:g}" for o in OVERLAPS)
    rows = [f"| config | source | ZB-V cost | {head} | DualPipe-V {OVERLAPS[-1]:g} / ZB-V | "
            "peak mem ZB-V / DualPipe-V |", "|---" * (5 + len(OVERLAPS)) + "|"]
    for path in sorted(profiles.glob("gpt*.json")):
        data = json.loads(path.read_text())
        v_data = {"num_ranks": data["num_ranks"], "num_microbatches": data["num_microbatches"],
                  "num_chunks": 2, "placement": "v", "t_comm": data["t_comm"]}
        for key in ("t_f", "t_b", "t_w", "m_b", "m_w"):
            v_data[key] = data[key] / 2
        if data["num_microbatches"] < 2 * data["num_ranks"]:
            continue
        zb_v = _metrics(v_data, "zb-v")
        costs = [_metrics({**v_data, "overlap": o}, "dualpipe-v") for o in OVERLAPS]
        source = "measured" if path.stem.startswith(MEASURED) else "derived"
        rows.append(f"| {path.stem} | {source} | {zb_v.cost:.1f} | "
                    + " | ".join(f"{c.cost:.1f}" for c in costs)
                    + f" | {costs[-1].cost / zb_v.cost:.3f} | "
                    f"{max(zb_v.peak_memory):g} / {max(costs[0].peak_memory):g} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", type=Path, default=ROOT / "profiles")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    started = start()
    closed, rows = closed_form_rows(), profile_rows(args.profiles)
    text = "\n".join([
        *result_header(command_line("benchmarks.dualpipe_v"), started=started,
                       budget="deterministic (simulated times, no search limit)"),
        "DualPipe-V, simulated (DESIGN.md cost model; figures are simulated times, not "
        "wall time).",
        "",
        "Closed forms of the DualPipe README for identical stages, t_comm = 0 (bubble = "
        "cost - busiest rank's op time; README form (p-1)(FB + t_b - 2 t_w)):",
        "",
        *closed,
        "",
        "The profiles cut into a V (half the per-stage times and memory; 6.2B and 14.6B "
        "profiles are derived, not measured), no memory limit; cost = step time in ms:",
        "",
        *rows,
    ]) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "dualpipe_v.md").write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
