"""The heuristic on randomized profiles far from the paper's, against the paper's algorithm
and against CP-SAT.

Run: ``python -m benchmarks.heuristic_robustness [--count N] [--seed S] [--cpsat-count K]
[--cpsat-work-limit W] [--cpsat-time-limit T] [--out DIR]``.

Profiles (seeded): p in 2..6, m in 1..12 (few microbatches), per-stage noise on every
time (x0.7-1.3), W-heavy (t_w up to 2 t_f) or t_w = 0, latency 0-0.5 t_f per stage
boundary, m_w from 0 to 1.5 m_b, and no limit, a scalar limit of 0.5p-2p (in units of
m_b) or per-rank limits in that range (a limit under one microbatch's need is raised to
it).

For each profile it solves the default heuristic (`solve(profile)`, single chunk) and the
paper's algorithm as the paper states it (`solver.generators.paper.paper_zb`: its 8 flag
combinations; where none fits the limit it has no figure) and prints the ratio
heuristic / paper. On the first ``--cpsat-count`` profiles it also runs
``solve(profile, "ilp")`` (CP-SAT from the heuristic's orders, `ExactOptions`' defaults)
with ``--cpsat-work-limit`` units of CP-SAT's deterministic time (the same answers on any
load; ``--cpsat-time-limit`` adds a wall-time limit) and prints heuristic / CP-SAT
(CP-SAT's figure is never above the heuristic's: it starts from it) and how many of those
CP-SAT proved optimal (over FIFO orders). Writes ``benchmarks/results/heuristic_robustness.md``.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from typing import Any

from ppsched.solver.heuristic.paper import paper_zb
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.solving import ExactOptions, solve

from benchmarks.result_header import command_line, result_header, start

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("heuristic_robustness.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "solver/exact", "benchmarks/heuristic_robustness.py",
)


def random_profile(rng: random.Random, index: int) -> dict[str, Any]:
    """One profile of the distribution in the module docstring."""
    p, m = rng.randint(2, 6), rng.randint(1, 12)
    t_f = rng.uniform(0.5, 2.0)

    def noisy(base: float) -> list[float]:
        return [round(base * rng.uniform(0.7, 1.3), 3) for _ in range(p)]

    t_w_base = rng.choice([0.0, rng.uniform(0.2, 1.0) * t_f, rng.uniform(1.0, 2.0) * t_f])
    m_b = [round(rng.uniform(0.8, 1.2), 3) for _ in range(p)]
    m_w_share = rng.choice([0.0, 0.5, 1.0, 1.5])
    kind = rng.choice(["none", "scalar", "per-rank"])
    limit: float | list[float] | None = None
    if kind == "scalar":
        limit = round(max(max(m_b), rng.uniform(0.5, 2.0) * p), 3)
    elif kind == "per-rank":
        limit = [round(max(b, rng.uniform(0.5, 2.0) * p), 3) for b in m_b]
    return {"name": f"random-{index}", "num_ranks": p, "num_microbatches": m,
            "t_f": noisy(t_f), "t_b": noisy(t_f * rng.uniform(0.8, 1.6)),
            "t_w": noisy(t_w_base),
            "t_comm": [round(rng.uniform(0.0, 0.5) * t_f, 3) for _ in range(p - 1)],
            "m_b": m_b, "m_w": [round(x * m_w_share, 3) for x in m_b], "memory_limit": limit}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--cpsat-count", type=int, default=100)
    parser.add_argument("--cpsat-work-limit", type=float, default=3.0,
                        help="CP-SAT's deterministic time per profile")
    parser.add_argument("--cpsat-time-limit", type=float, default=None,
                        help="a wall-time limit as well (the answers then depend on the load)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    started = start()
    began = time.perf_counter()
    options = ExactOptions(work_limit=args.cpsat_work_limit, time_limit_s=args.cpsat_time_limit)
    vs_paper: list[tuple[float, str]] = []
    vs_cpsat: list[tuple[float, str]] = []
    no_paper = proven = fits = 0
    failed: list[str] = []
    for index in range(args.count):
        data = random_profile(rng, index)
        profile = parse_profile(data)
        ours = solve(profile)
        assert ours.metrics is not None
        cost = ours.metrics.cost
        # The heuristic's schedule within every rank's limit (the simulator's peaks).
        fits += all(peak <= limit + 1e-9 for peak, limit in
                    zip(ours.metrics.peak_memory, profile.problem.memory_limit, strict=True))
        paper = paper_zb(profile.problem)
        if paper is None:
            no_paper += 1
        else:
            vs_paper.append((cost / paper.cost, data["name"]))
        if index < args.cpsat_count:
            try:
                exact = solve(profile, "ilp", exact=options)
            except Exception as exc:
                failed.append(f"{data['name']}: {type(exc).__name__}: {exc}")
                continue
            assert exact.metrics is not None and exact.solver is not None
            vs_cpsat.append((cost / exact.metrics.cost, data["name"]))
            proven += exact.solver.status == "optimal"
        if (index + 1) % 50 == 0:
            print(f"{index + 1} profiles, {time.perf_counter() - began:.0f} s", flush=True)
    vs_paper.sort(reverse=True)
    vs_cpsat.sort(reverse=True)

    def worst(pairs: list[tuple[float, str]]) -> str:
        return ", ".join(f"{r:.4f} ({name})" for r, name in pairs[:5])

    better = sum(r < 1 - 1e-9 for r, _ in vs_paper)
    budget = ("wall" if options.time_limit_s is not None else "deterministic") + \
        f" (CP-SAT {_budget(options)} per profile)"
    lines = [
        *result_header(command_line("benchmarks.heuristic_robustness"), budget=budget,
                       started=started),
        "| comparison | profiles | worst ratio | mean ratio | heuristic better | equal |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        f"| heuristic / paper's algorithm | {len(vs_paper)} | {vs_paper[0][0]:.4f} | "
        f"{sum(r for r, _ in vs_paper) / len(vs_paper):.4f} | {better} | "
        f"{sum(abs(r - 1) <= 1e-9 for r, _ in vs_paper)} |",
        f"| heuristic / CP-SAT ({_budget(options)}) | {len(vs_cpsat)} | "
        f"{vs_cpsat[0][0]:.4f} | {sum(r for r, _ in vs_cpsat) / len(vs_cpsat):.4f} | - | "
        f"{sum(abs(r - 1) <= 1e-9 for r, _ in vs_cpsat)} |",
        "",
        f"Worst heuristic / paper: {worst(vs_paper)}.",
        f"Worst heuristic / CP-SAT: {worst(vs_cpsat)}.",
        "",
        f"{args.count} seeded profiles (seed {args.seed}): p 2-6, m 1-12, per-stage noise, "
        "t_w 0 to 2 t_f, latency 0-0.5 t_f per boundary, m_w 0-1.5 m_b, no limit or "
        f"scalar or per-rank limits of 0.5p-2p. The paper's algorithm fits the limit on "
        f"{len(vs_paper)} of them (on {no_paper} none of its 8 runs does); the heuristic's "
        f"schedule fits it on {fits} of {args.count}. CP-SAT (`solve(profile, \"ilp\")`, "
        f"{'FIFO' if options.fifo else 'free-order'} model, {options.workers} workers, "
        f"{_budget(options)} each) ran on the first "
        f"{len(vs_cpsat)} where it ran and proved {proven} optimal over FIFO orders; "
        f"`solve(profile, \"ilp\")` failed on {len(failed)} of the first "
        f"{args.cpsat_count}" + (f" (first: {failed[0]})" if failed else "") + "; "
        f"{time.perf_counter() - began:.0f} s of wall time in all.",
    ]
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "heuristic_robustness.md").write_text(text)
    print(text)
    return 0


def _budget(options: ExactOptions) -> str:
    """CP-SAT's limits as the table names them."""
    return f"work limit {options.work_limit:g}" + (
        f", {options.time_limit_s:g} s wall" if options.time_limit_s is not None else "")


if __name__ == "__main__":
    raise SystemExit(main())
