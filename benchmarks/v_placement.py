"""Our best V-placement schedule against the ZB-V generator, and the V search's time.

Run: ``python -m benchmarks.v_placement [--repeat N] [--out DIR]``.

Every public profile is cut into two chunks per rank in V placement (`with_chunks`: half
the times and memory per stage, the same model) and solved at 1p and 2p of its one-chunk
limit: ``zb-v`` is the ZB-V generator's order (when it fits the limit) and ``ours`` the
heuristic's search over V (`solve.heuristic_orders`: the greedy's knobs, the named V
schedules that fit, and the local search). Both are simulator costs. The time columns
compare, side by side (interleaved, best of N), the V search with the single-chunk
heuristic on the same profile. Writes ``benchmarks/results/v_placement.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from ppsched.solver.generators import get_generator
from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import simulate
from ppsched.solver.solving.pipeline import heuristic_orders

from benchmarks.result_header import command_line, result_header, start

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("v_placement.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "profiles/*.json", "benchmarks/v_placement.py",
)
DERIVED = ("gpt6.2b", "gpt14.6b")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--profiles", type=Path, default=ROOT / "profiles")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    started = start()
    lines = ["| profile | memory | ZB-V cost | our V cost | ours / ZB-V | V search s | "
             "single-chunk s | V / single time |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    worst = 0.0
    for path in sorted(args.profiles.glob("*.json")):
        data = json.loads(path.read_text())
        for multiple in (1, 2):
            limit = data["memory_limit"]
            one = parse_profile({**data, "memory_limit": None if limit is None
                                 else limit * multiple})
            v = with_chunks(one, 2, "v")
            zbv = simulate(v.problem, get_generator("zb-v")(v.problem))
            zbv_cost = zbv.metrics.cost if zbv.ok and zbv.metrics else math.inf
            v_s = single_s = math.inf
            value = math.inf
            for _ in range(args.repeat):
                began = time.perf_counter()
                _, _, value = heuristic_orders(v.problem)
                v_s = min(v_s, time.perf_counter() - began)
                began = time.perf_counter()
                heuristic_orders(one.problem)
                single_s = min(single_s, time.perf_counter() - began)
            ratio = value / zbv_cost if math.isfinite(zbv_cost) else math.nan
            if math.isfinite(ratio):
                worst = max(worst, ratio)
            label = data["name"] + (" (derived)" if data["name"].startswith(DERIVED) else "")
            memory = f"{multiple}p" if limit is not None else "none"
            zbv_text = f"{zbv_cost:.1f}" if math.isfinite(zbv_cost) else "over the limit"
            row = (f"| {label} | {memory} | {zbv_text} | {value:.1f} | "
                   f"{ratio:.4f} | {v_s:.3f} | {single_s:.3f} | {v_s / single_s:.2f} |")
            print(row, flush=True)
            lines.append(row)
            if limit is None:
                break
    lines += ["", f"Worst ours / ZB-V: {worst:.4f}. Seconds: best of {args.repeat} (wall "
              "time, cores shared). The 6.2B and 14.6B profiles are derived, not measured."]
    args.out.mkdir(parents=True, exist_ok=True)
    header = result_header(command_line("benchmarks.v_placement", argv), started=started,
                           budget="wall (the s columns are wall time; the costs deterministic)")
    (args.out / "v_placement.md").write_text("\n".join(header + lines) + "\n")
    print(lines[-1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
