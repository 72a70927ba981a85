"""Heuristic speed, side by side with the Zero Bubble reference heuristic in one run.

Run: ``python -m benchmarks.heuristic_speed [--reference DIR] [--repeat N] [--out DIR]``.

For every paper profile (``gpt*``) at 1p and 2p memory, and for p=32, m=256 and p=64,
m=256 (the 28.3B stage times, 1p), it times, interleaved (the columns take turns) and
best of N or more (as many runs as fill `MIN_TOTAL_S` per column):

- ``ours``: `solver.solve.solve(profile)`, the whole default solve (the knob search, the
  paper's algorithm as a candidate, the local search, the final simulation and the
  Schedule), single chunk, each run cold (a profile parsed afresh, the lower bound's
  cache emptied; neither is timed);
- ``paper``: our implementation of the paper's algorithm alone
  (`solver.generators.paper.paper_zb`, its 8 flag combinations);
- ``ref``: the reference implementation's ``Graph.build_graph`` + ``initial_solution``
  (sail-sg/zero-bubble-pipeline-parallelism, ``megatron/core/pipeline_parallel/
  zerobubble/scheduler/zb.py``), when ``--reference DIR`` names a folder from which
  ``megatron.core.pipeline_parallel.zerobubble.scheduler.zb`` imports (its ``graph.py``
  and ``zb.py`` copied there with empty ``__init__.py`` files). None of the reference's
  code is in this repository; without the folder that column is left out. The reference's
  orders are re-timed by our simulator, so its cost column is our cost model's.

The reference takes one ``cost_comm`` for all stage boundaries and memory per stage, as
the paper profiles have. Writes ``benchmarks/results/heuristic_speed.md`` with the load
average of the machine during the run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from ppsched.solver.heuristic.paper import paper_zb
from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.ops import Op
from ppsched.solver.model.profile import Profile, parse_profile
from ppsched.solver.sim.simulator import simulate
from ppsched.solver.solving.entry import solve

from benchmarks.result_header import command_line, result_header, start, without_paths

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("heuristic_speed.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "profiles/gpt*.json", "benchmarks/heuristic_speed.py",
)
DERIVED = ("gpt6.2b", "gpt14.6b")  # derived profiles, not measured (see the profiles)


def _profiles(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    """The rows: a label and the profile's JSON data."""
    out = []
    for path in sorted(folder.glob("gpt*.json")):
        data = json.loads(path.read_text())
        for multiple in (1, 2):
            limit = data["memory_limit"] * multiple
            label = f"{data['name']} {multiple}p"
            if data["name"].startswith(DERIVED):
                label += " (derived)"
            out.append((label, {**data, "memory_limit": limit}))
    big = json.loads((folder / "gpt28.3b-p32-m256.json").read_text())
    for p in (32, 64):
        data = {**big, "name": f"p{p}-m256", "num_ranks": p, "num_microbatches": 256,
                "memory_limit": float(p) * big["m_b"]}
        out.append((f"p={p}, m=256, 1p (28.3B stage times)", data))
    return out


def _cold(data: dict[str, Any]) -> Profile:
    """A profile with nothing of an earlier solve cached: parsed afresh (its problem's
    cached properties are new) and with the lower bound's cache emptied."""
    lower_bound.cache_clear()
    return parse_profile(data)


class Reference:
    """The reference heuristic, imported from a folder outside this repository."""

    def __init__(self, folder: Path) -> None:
        sys.path.insert(0, str(folder))
        base = "megatron.core.pipeline_parallel.zerobubble.scheduler"
        self.zb = importlib.import_module(f"{base}.zb")
        self.graph = importlib.import_module(f"{base}.graph")

    def run(self, profile: Profile) -> Any:
        pr = profile.problem
        p, m = pr.num_ranks, pr.num_microbatches
        mem_f = list(pr.m_b)
        mem_b = [w - b for w, b in zip(pr.m_w, pr.m_b, strict=True)]
        mem_w = [-(f + b) for f, b in zip(mem_f, mem_b, strict=True)]  # sums to 0 exactly
        limit = [x if math.isfinite(x) else 3.0 * m * f for x, f in
                 zip(pr.memory_limit, mem_f, strict=True)]
        config = self.graph.GraphConfig(
            mem_f=mem_f, mem_b=mem_b, mem_w=mem_w, max_mem=limit,
            cost_f=[float(x) for x in pr.t_f], cost_b=[float(x) for x in pr.t_b],
            cost_w=[float(x) for x in pr.t_w], cost_comm=float(pr.t_comm[0]) if p > 1
            else 0.0, n_stages=p, n_micro=m)
        graph = self.zb.Graph.build_graph(p, m, config)
        return graph, self.zb.initial_solution(graph, print_result=False)

    @staticmethod
    def cost(profile: Profile, result: Any) -> float:
        """The reference's orders re-timed by our simulator."""
        graph, (_, order, _) = result
        pr = profile.problem
        p, m = pr.num_ranks, pr.num_microbatches
        ranks: list[list[tuple[int, Op]]] = [[] for _ in range(p)]
        for kind_index, kind in enumerate(("F", "B", "W")):
            for s in range(p):
                for j in range(m):
                    ranks[s].append((order[graph.get_id(kind_index, s, j)],
                                     Op(kind, s, j)))  # type: ignore[arg-type]
        orders = [[op for _, op in sorted(r)] for r in ranks]
        sim = simulate(pr, orders)
        assert sim.ok and sim.metrics is not None, sim.violations[:2]
        return sim.metrics.cost


def _given(value: Any) -> Any:
    """A setup that only hands `value` over (nothing to prepare, nothing cached)."""
    return value


MIN_TOTAL_S = 0.25
"""Each column of a row runs at least this long in all: a p=8 solve takes a few
milliseconds, and the best of 5 of those swings with the machine's load."""


def _best_of_interleaved(columns: list[tuple[Callable[[Any], Any], Callable[[], Any]]],
                         repeat: int) -> list[tuple[float, Any]]:
    """For each column ``(fn, setup)``, the least time of its calls of ``fn(setup())``
    (setup not timed) and its last value. The columns take turns, one call each per
    round, so the machine's load falls on all alike; the rounds go on until each column
    ran at least `repeat` times and `MIN_TOTAL_S` in all."""
    best = [math.inf] * len(columns)
    total = [0.0] * len(columns)
    values: list[Any] = [None] * len(columns)
    rounds = 0
    while rounds < repeat or min(total) < MIN_TOTAL_S:
        for k, (fn, setup) in enumerate(columns):
            given = setup()
            began = time.perf_counter()
            values[k] = fn(given)
            took = time.perf_counter() - began
            best[k], total[k] = min(best[k], took), total[k] + took
        rounds += 1
    return list(zip(best, values, strict=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=None,
                        help="folder the reference's zb.py imports from (optional)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profiles", type=Path, default=ROOT / "profiles")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    ref = Reference(args.reference) if args.reference else None
    started = start()
    head = "| profile | ours s | paper alg. s | ours cost | paper alg. cost |"
    rule = "| --- | ---: | ---: | ---: | ---: |"
    if ref:
        head += " ref s | ref cost | ours/ref time |"
        rule += " ---: | ---: | ---: |"
    lines = [head, rule]
    ratios = []
    for label, data in _profiles(args.profiles):
        profile = parse_profile(data)
        # Interleaved, so that the machine's load falls on all columns alike. Each of our
        # solves starts cold (`_cold`), as the reference's runs do.
        columns: list[tuple[Callable[[Any], Any], Callable[[], Any]]] = [
            (solve, partial(_cold, data)), (paper_zb, partial(_given, profile.problem))]
        if ref:
            columns.append((ref.run, partial(_given, profile)))
        timed = _best_of_interleaved(columns, args.repeat)
        (ours_s, schedule), (paper_s, paper) = timed[0], timed[1]
        cost = schedule.metrics.cost
        row = (f"| {label} | {ours_s:.3f} | {paper_s:.3f} | {cost:.1f} | "
               f"{paper.cost:.1f} |" if paper else "- |")
        if ref:
            ref_s, result = timed[2]
            ratios.append(ours_s / ref_s)
            row += f" {ref_s:.3f} | {ref.cost(profile, result):.1f} | {ours_s / ref_s:.2f} |"
        print(row, flush=True)
        lines.append(row)
    notes = [
        "",
        f"Seconds are the best of at least {args.repeat} runs (and of as many as fill "
        f"{MIN_TOTAL_S:g} s per column), measured side by side (the columns take turns, one "
        "run each) in one run of `python -m benchmarks.heuristic_speed"
        + (" --reference DIR`" if ref else "`") + " (machine and load in the first line). "
        "Costs are our simulator's (the reference's orders "
        "re-timed). The 6.2B and 14.6B profiles are derived, not measured.",
    ]
    if ref:
        notes.append(f"ours/ref time: geometric mean "
                     f"{statistics.geometric_mean(ratios):.2f}, max {max(ratios):.2f}, "
                     f"min {min(ratios):.2f}.")
    else:
        notes.append("The reference column is left out: no `--reference` folder was given.")
    header = result_header(command_line("benchmarks.heuristic_speed", without_paths(argv)),
                           started=started,
                           budget="wall (the seconds are wall time; the costs deterministic)")
    text = "\n".join(header + lines + notes) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "heuristic_speed.md").write_text(text)
    print("\n".join(notes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
