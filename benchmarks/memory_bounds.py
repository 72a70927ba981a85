"""Lower bounds where memory binds: the closed forms, the memory relaxation, CP-SAT's.

Run: ``python -m benchmarks.memory_bounds``. For each profile (one chunk per rank) and
each memory limit from 0.25p to 1p (multiples of the profile's 1p limit, ``p * m_b``) it
records:

- the general bound before (`solver.bounds.lower_bound`, closed forms; every schedule);
- the memory relaxation's bound (`solver.memory_relaxation`; every schedule), each
  CP-SAT run limited by CP-SAT's *deterministic* time on one worker so that the bound
  repeats on any load, with its wall time and the run that gave it;
- CP-SAT's bound after 10 deterministic seconds (one worker, seed 0) of `--method ilp`'s
  model, which holds over FIFO orders only, and the cost it found;
- the single-chunk heuristic's cost.

Writes ``benchmarks/results/memory_bounds.md``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ppsched.solver.exact.cpsat import solve_cpsat_phased
from ppsched.solver.exact.memory_relaxation import relaxation_runs
from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.profile import load_profile
from ppsched.solver.solving.pipeline import heuristic_orders

from benchmarks.bubble_table import with_limit_multiple
from benchmarks.markdown_table import markdown_table
from benchmarks.result_header import Started, command_line, result_header, start

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("memory_bounds.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "solver/exact", "profiles/gpt*.json", "benchmarks/bubble_table.py",
    "benchmarks/memory_bounds.py",
)
RESULTS = ROOT / "benchmarks" / "results"
PROFILES = ("gpt1.5b-p8-m24", "gpt14.6b-p16-m48")
MULTIPLES = (0.25, 0.5, 0.75, 1.0)
DERIVED = ("gpt14.6b",)
# CP-SAT's deterministic seconds per relaxation run (one rank, or a window of two), and
# for the FIFO model.
RELAXATION_DETERMINISTIC_S = 30.0
CPSAT_DETERMINISTIC_S = 10.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="first profile, 0.75p only")
    args = parser.parse_args()
    profiles = PROFILES[:1] if args.quick else PROFILES
    multiples = (0.75,) if args.quick else MULTIPLES
    started = start()
    began = time.perf_counter()
    rows = []
    for name in profiles:
        base = load_profile(ROOT / "profiles" / f"{name}.json")
        for multiple in multiples:
            profile = with_limit_multiple(base, multiple)
            problem = profile.problem
            orders, _, heuristic = heuristic_orders(problem)
            old = lower_bound(problem)
            relax_began = time.perf_counter()
            # As `--method ilp` runs it: not at all where the general bound meets the
            # heuristic, and no further once it does.
            runs = [] if old >= heuristic - 1e-9 else relaxation_runs(
                problem, time_limit_s=3600.0, deterministic_s=RELAXATION_DETERMINISTIC_S,
                stop_at=heuristic)
            relax_s = time.perf_counter() - relax_began
            best = max(runs, key=lambda r: r.bound, default=None)
            alone = max((r.bound for r in runs if r.num_ranks == 1), default=0.0)
            fifo = solve_cpsat_phased(problem, orders, time_limit_s=600, workers=1, seed=0,
                                      deterministic_s=CPSAT_DETERMINISTIC_S)
            if best is None:
                relaxation, alone_text = "not run (the old bound meets the heuristic)", "-"
            else:
                window = "rank" if best.num_ranks == 1 else "ranks"
                ranks = "-".join(str(r) for r in range(best.first,
                                                       best.first + best.num_ranks))
                relaxation = (f"{best.bound:.1f} ({window} {ranks}"
                              f"{', optimal' if best.optimal else ''})")
                alone_text = f"{alone:.1f}"
            row = {
                "config": name, "memory": f"{multiple:g}p", "limit": profile.memory_limit,
                "old bound": f"{old:.1f}",
                "new bound": f"{max(old, best.bound if best else 0.0):.1f}",
                "one rank": alone_text,
                "relaxation": relaxation,
                "relaxation wall s": f"{relax_s:.1f}",
                "CP-SAT FIFO bound 10 s": f"{fifo.bound:.1f}",
                "CP-SAT cost 10 s": f"{fifo.objective:.1f}",
                "heuristic": f"{heuristic:.1f}",
            }
            print(row, flush=True)
            rows.append(row)
    write(rows, profiles, time.perf_counter() - began, started, args.quick)


def write(rows: list[dict[str, object]], profiles: tuple[str, ...], wall: float,
          started: Started, quick: bool) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = "memory_bounds_quick" if quick else "memory_bounds"
    derived = [p for p in profiles if p.startswith(DERIVED)]
    lines = [
        *result_header(command_line("benchmarks.memory_bounds"), started=started,
                       budget=f"deterministic (CP-SAT work limits {RELAXATION_DETERMINISTIC_S:g}"
                       f" / {CPSAT_DETERMINISTIC_S:g}; the wall s column is wall)"),
        f"Lower bounds on the cost where memory binds (one chunk per rank); {wall:.0f} s of "
        "wall time in all.",
        "",
        "Memory is a multiple of the profile's 1p limit (p * m_b). `old bound`: "
        "`ppsched.solver.model.bounds.lower_bound` (closed forms); `new bound`: its max with the "
        "memory relaxation of `ppsched.solver.exact.memory_relaxation` (one rank kept whole "
        "with the exact "
        "memory rule, then the best rank with its downstream neighbour; `one rank`: the "
        "best rank alone; `relaxation`: the best run, and whether CP-SAT closed it), each "
        "CP-SAT run "
        f"on one worker and limited to {RELAXATION_DETERMINISTIC_S:g} s of CP-SAT's "
        "deterministic time; both hold over every valid schedule. `relaxation wall s`: "
        "all its runs, wall time on this machine; like `--method ilp`, it is not run where "
        "the old bound meets the heuristic's cost and stops once it does. "
        "`CP-SAT FIFO bound 10 s`: the bound of `--method ilp`'s model (one worker, "
        "seed 0, 10 deterministic seconds), which "
        "holds over FIFO orders only; `CP-SAT cost 10 s`: the schedule it found; "
        "`heuristic`: the single-chunk heuristic.",
    ]
    if derived:
        lines += ["", f"The {', '.join(derived)} profiles are derived from the paper's "
                  "configurations, not measured."]
    lines += ["", *markdown_table(rows)]
    (RESULTS / f"{stem}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
