"""How far the exact refinement gets beyond the heuristic, and how fast.

Run: ``python -m benchmarks.solver_quality [--time-limit S] [--big-time-limit S] ...``.
For every profile in ``profiles/`` at 0.75x, 1x (1p) and 2x (2p) the profile's memory
limit, it runs the heuristic, then CP-SAT from its schedule (FIFO, the paper's model),
and records cost, bound, gap, time to the first improvement and to the best, and the
status. It also runs CP-SAT with free B/W order (``--free-order`` in the CLI) on
pipelines of at most ``--free-max-ranks`` ranks, and the MILP backend on the instances
with at most ``--milp-max-ops`` ops. Writes ``benchmarks/results/solver_quality.{md,csv}``.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

from ppsched.solver.exact.cpsat import solve_cpsat
from ppsched.solver.exact.frame import ExactResult
from ppsched.solver.heuristic.search import zb_heuristic
from ppsched.solver.model.profile import Profile, load_profile

from benchmarks.bubble_table import with_limit_multiple
from benchmarks.result_header import command_line, result_header, start

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("solver_quality.md", "solver_quality.csv")
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "solver/exact", "profiles/*.json", "benchmarks/bubble_table.py",
    "benchmarks/solver_quality.py",
)


def run_exact(kind: str, profile: Profile, hint: list, time_limit_s: float,
              workers: int) -> ExactResult:
    problem = profile.problem
    if kind == "milp":
        from ppsched.solver.exact.milp import solve_milp

        return solve_milp(problem, hint, time_limit_s=time_limit_s)
    # The plain model (tight=False), as when the committed results were measured; the
    # order-literal model below 1F1B's memory is measured by benchmarks.bubble_memory.
    return solve_cpsat(problem, hint, time_limit_s=time_limit_s, workers=workers,
                       fifo=kind == "cpsat", tight=False)


def row_for(profile: Profile, multiple: float, kind: str, heuristic_cost: float,
            heuristic_s: float, result: ExactResult) -> dict[str, object]:
    improved = [t for t, best, _ in result.progress if best < heuristic_cost - 1e-6]
    # The trace gains a point at each improvement: its last point is the best solution.
    best_at = result.progress[-1][0] if result.progress else None
    problem = profile.problem
    busy = problem.simple_lower_bound
    return {
        "config": profile.label, "p": profile.num_ranks, "m": profile.num_microbatches,
        "memory": f"{multiple:g}p", "backend": kind,
        "heuristic cost": round(heuristic_cost, 3),
        "heuristic bubble": round((heuristic_cost - busy) / heuristic_cost, 4),
        "heuristic s": round(heuristic_s, 3),
        "exact cost": round(result.objective, 3) if result.objective else None,
        "exact bubble": round((result.objective - busy) / result.objective, 4)
        if result.objective else None,
        "improvement %": round(100 * (heuristic_cost - result.objective) / heuristic_cost, 3)
        if result.objective else None,
        "bound": round(result.bound, 3), "gap %": round(100 * result.gap, 3),
        "status": result.status,
        "first improvement s": round(improved[0], 2) if improved else None,
        "best at s": round(best_at, 2) if best_at is not None else None,
        "wall s": round(result.wall_s, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default=str(ROOT / "profiles"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    parser.add_argument("--multiples", default="0.75,1,2",
                        help="memory limits as multiples of the profile's (its 1p)")
    parser.add_argument("--time-limit", type=float, default=10.0, help="p <= 16")
    parser.add_argument("--big-time-limit", type=float, default=60.0, help="p > 16")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--free-max-ranks", type=int, default=16)
    parser.add_argument("--milp-max-ops", type=int, default=600)
    parser.add_argument("--only", default="", help="substring filter on profile names")
    args = parser.parse_args()
    started = start()

    rows = []
    for path in sorted(Path(args.profiles).glob("*.json")):
        if args.only not in path.stem:
            continue
        base = load_profile(path)
        for multiple in (float(x) for x in args.multiples.split(",")):
            if base.memory_limit is None and multiple != 1:
                continue
            try:
                profile = with_limit_multiple(base, multiple)
            except ValueError as exc:  # below what one microbatch needs
                print(f"skip {base.label} {multiple:g}p: {exc}")
                continue
            problem = profile.problem
            began = time.perf_counter()
            hint = zb_heuristic(problem)
            heuristic_s = time.perf_counter() - began
            limit = args.time_limit if problem.num_ranks <= 16 else args.big_time_limit
            kinds = ["cpsat"]
            if problem.num_ranks <= args.free_max_ranks:
                kinds.append("cpsat-free")
            if 3 * problem.num_stages * problem.num_microbatches <= args.milp_max_ops:
                kinds.append("milp")
            for kind in kinds:
                result = run_exact(kind, profile, hint.orders, limit, args.workers)
                row = row_for(profile, multiple, kind, hint.cost, heuristic_s, result)
                rows.append(row)
                print(" | ".join(str(v) for v in row.values()), flush=True)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "solver_quality.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    columns = list(rows[0])
    lines = [*result_header(command_line("benchmarks.solver_quality"), started=started,
                            budget="wall (the exact solvers' time limits are wall time, as "
                            "are the s columns: the figures depend on the load)"),
             f"Exact refinement from the heuristic; {args.workers} workers, time limit "
             f"{args.time_limit:g} s (p <= 16) / "
             f"{args.big_time_limit:g} s (p > 16). Costs are re-timed by the simulator.",
             "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join("" if v is None else str(v) for v in r.values()) + " |"
              for r in rows]
    (out / "solver_quality.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
