"""Lower bounds on V schedules where memory binds: the closed forms against the V
placement's memory relaxation (`ppsched.solver.exact.v_relaxation`).

Run: ``python -m benchmarks.v_memory_bounds [--deterministic S] [--out DIR]``.

Below 1p the default solve also cuts the model in V; this prints, for gpt1.5b-p8-m24 and
the derived gpt14.6b-p16-m48 at 0.25p, 0.5p and 0.75p of their one-chunk limit, the V
cut's closed-form bound (`ppsched.solver.model.bounds.lower_bound`: op time, warm-up), the
relaxation of ranks 0, p/2 and p - 1 (each CP-SAT run on one worker, limited to S deterministic
seconds, so the bounds repeat on any load; wall seconds do not) and the V heuristic's
cost beside the cheapest named V schedule that fits. Every bound holds over every valid
V schedule. Writes ``benchmarks/results/v_memory_bounds.md``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ppsched.solver.exact.v_relaxation import memory_binds, v_rank_relaxation_bound
from ppsched.solver.generators import REGISTRY
from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import simulate
from ppsched.solver.solving.pipeline import heuristic_orders

from benchmarks.markdown_table import markdown_table
from benchmarks.result_header import command_line, result_header, start

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("v_memory_bounds.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "solver/exact", "profiles/gpt1.5b-p8-m24.json",
    "profiles/gpt14.6b-p16-m48.json", "benchmarks/v_memory_bounds.py",
)
CONFIGS = ("gpt1.5b-p8-m24", "gpt14.6b-p16-m48")
MULTIPLES = (0.25, 0.5, 0.75)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deterministic", type=float, default=10.0)
    parser.add_argument("--profiles", type=Path, default=ROOT / "profiles")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    started, began = start(), time.perf_counter()
    rows: list[dict[str, object]] = []
    for name in CONFIGS:
        data = json.loads((args.profiles / f"{name}.json").read_text())
        for multiple in MULTIPLES:
            limit = data["memory_limit"] * multiple
            v = with_chunks(parse_profile({**data, "memory_limit": limit}), 2, "v").problem
            p = v.num_ranks
            runs = [v_rank_relaxation_bound(v, r, deterministic_s=args.deterministic)
                    for r in (0, p // 2, p - 1) if memory_binds(v, r)]
            general = lower_bound(v)
            best = max(runs, key=lambda x: x.bound, default=None)
            _, source, cost = heuristic_orders(v)
            named = _best_named(v)
            relaxed = [f"{x.bound:.1f} (rank {x.first}{', optimal' if x.optimal else ''})"
                       for x in runs]
            rows.append({
                "config": name, "memory": f"{multiple:g}p", "limit": f"{limit:g}",
                "closed-form bound": f"{general:.1f}",
                "relaxation by rank": "; ".join(relaxed) or "-",
                "bound": f"{max(general, best.bound if best else 0.0):.1f}",
                "relaxation wall s": f"{sum(x.wall_s for x in runs):.1f}",
                "best named V schedule": f"{named[0]:.1f} ({named[1]})" if named else "none fits",
                "V heuristic": f"{cost:.1f} ({source})"})
            print(" | ".join(map(str, rows[-1].values())), flush=True)
    table = "\n".join(markdown_table(rows)) + "\n"
    header = result_header(command_line("benchmarks.v_memory_bounds", argv),
                           started=started, budget=f"deterministic (CP-SAT work limit "
                           f"{args.deterministic:g} per run; the wall s column is wall)")
    text = ("\n".join(header) + "\n"
            f"Lower bounds on V schedules where memory binds (two chunks per rank, V "
            f"placement); {time.perf_counter() - began:.0f} s of wall time in all.\n\n"
            "Memory is a multiple of the one-chunk profile's 1p limit (p * m_b); the V cut "
            "halves each stage's activations. `closed-form bound`: `ppsched.solver.model.bounds."
            "lower_bound` of the V cut (its busiest rank's op time and the warm-up that "
            "memory caps); `relaxation by rank`: "
            "`ppsched.solver.exact.v_relaxation` keeping that rank whole with its exact memory "
            "rule "
            f"(CP-SAT, one worker, {args.deterministic:g} deterministic seconds); `bound`: "
            "the larger, which holds over every valid V schedule; `best named V schedule`: "
            "the cheapest of the named V schedules (ZB-V, V-Half, V-Min, DualPipe-V) that "
            "fits the limit; `V heuristic`: the V search's cost "
            "(`ppsched.solver.solving.pipeline.heuristic_orders`).\n\n"
            "The gpt14.6b-p16-m48 profile is derived from the paper's configurations, not "
            f"measured.\n\n{table}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "v_memory_bounds.md").write_text(text)
    return 0


def _best_named(problem: Problem) -> tuple[float, str] | None:
    """The cost and name of the cheapest named schedule of the placement that fits."""
    costs = []
    for name, generator in sorted(REGISTRY.items()):
        if generator.supports(problem):
            sim = simulate(problem, generator(problem))
            if sim.ok and sim.metrics is not None:
                costs.append((sim.metrics.cost, name))
    return min(costs, default=None)


if __name__ == "__main__":
    raise SystemExit(main())
