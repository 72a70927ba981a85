"""`--method ilp` on the one-chunk and V layouts where memory binds, under a deterministic
budget: the heuristic's cost, the exact refinement's, and the bound over both layouts.

Run: ``python -m benchmarks.ilp_layouts [--deterministic S] [--jobs N] [--out DIR]``.

Every public profile (``profiles/*.json``) at 0.5p and 0.75p (limit = level * p * m_b),
each layout (``1``: one stage per rank; ``v``: the V cut) refined as `--method ilp` does
(`ppsched.solver.solving.refine`: the memory relaxation, then CP-SAT, or the shared-memory
model and windows of `ppsched.solver.exact.multichunk` on V), with CP-SAT on one worker,
seed 0 and S deterministic seconds per layout (and as many for the relaxation), so the
figures repeat on any load. A layout's bound is the largest of the closed forms, the
relaxation (both over every schedule of the layout) and the exact model's (over its FIFO
orders, when it is the largest: the scope column says so); the bound over both layouts
is the smaller of the two, and the gap is the best cost's distance to it. Writes
``benchmarks/results/ilp_layouts.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ppsched.solver.exact.frame import SCOPE_ALL
from ppsched.solver.exact.memory_relaxation import memory_relaxation_bound
from ppsched.solver.exact.v_relaxation import applies as applies_to_v
from ppsched.solver.exact.v_relaxation import v_memory_relaxation_bound
from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.profile import Profile, parse_profile
from ppsched.solver.solving.pipeline import heuristic_orders
from ppsched.solver.solving.refine import RELAXATION_MAX_MICROBATCHES, ExactOptions, refine

from benchmarks.markdown_table import markdown_table
from benchmarks.result_header import Started, command_line, result_header, start

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("ilp_layouts.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "solver/exact", "profiles/*.json", "benchmarks/ilp_layouts.py",
)
LEVELS = (0.5, 0.75)
LAYOUTS = ("1", "v")


def layout_row(profile: Profile, deterministic_s: float) -> dict[str, object]:
    """One layout refined: heuristic cost, ilp cost, the bound and its scope, CPU s."""
    began = time.process_time()
    problem = profile.problem
    hint, _, cost = heuristic_orders(problem)
    general = lower_bound(problem)
    relaxed = 0.0
    if problem.num_microbatches <= RELAXATION_MAX_MICROBATCHES and general < cost - 1e-9:
        relaxation = v_memory_relaxation_bound if applies_to_v(problem) \
            else memory_relaxation_bound
        relaxed = relaxation(problem, time_limit_s=100 * deterministic_s + 60,
                             deterministic_s=deterministic_s, workers=1, stop_at=cost)
    options = ExactOptions(workers=1, seed=0, work_limit=deterministic_s)
    result = refine(profile, hint, "cost", options)
    assert result.objective is not None
    everywhere = max(general, relaxed)
    bound = max(everywhere, min(result.bound, result.objective))
    return {"heuristic": cost, "ilp": result.objective, "bound": bound,
            "scope": SCOPE_ALL if bound <= everywhere + 1e-9 else result.scope,
            "status": result.status, "cpu_s": time.process_time() - began}


def case(args: tuple[Path, float, float]) -> dict[str, object]:
    """Both layouts of one profile at one level, and the bound over both."""
    path, level, deterministic_s = args
    data = json.loads(path.read_text())
    m_b = data["m_b"] if isinstance(data["m_b"], (int, float)) else max(data["m_b"])
    limit = level * data["num_ranks"] * m_b
    one = parse_profile({**data, "memory_limit": limit})
    rows = {"1": layout_row(one, deterministic_s),
            "v": layout_row(with_chunks(one, 2, "v"), deterministic_s)}
    best = min(float(r["ilp"]) for r in rows.values())  # type: ignore[arg-type]
    bound = min(float(r["bound"]) for r in rows.values())  # type: ignore[arg-type]
    return {"profile": path.stem, "level": level, "limit": limit, "rows": rows,
            "best": best, "bound": bound, "gap": (best - bound) / best if best > 0 else 0.0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deterministic", type=float, default=10.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--profiles", type=Path, default=ROOT / "profiles")
    parser.add_argument("--only", default="", help="comma-separated profile names")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    started, began = start(), time.perf_counter()
    # The small profiles first, so a run cut short still covers most of them.
    paths = sorted(args.profiles.glob("*.json"), key=lambda p: (_size(p), p.stem))
    if args.only:
        paths = [p for p in paths if p.stem in args.only.split(",")]
    work = [(path, level, args.deterministic) for path in paths for level in LEVELS]
    cases: list[dict[str, object]] = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        # The table is rewritten after each case: a long run leaves what it measured.
        for done in pool.map(case, work):
            cases.append(done)
            write(cases, args, started, began, len(work))
    print(f"median gap {100 * _median(cases):.2f}%")
    return 0


def _size(path: Path) -> int:
    data = json.loads(path.read_text())
    return int(data["num_ranks"]) * int(data["num_microbatches"])


def _median(cases: list[dict[str, object]]) -> float:
    gaps = [float(c["gap"]) for c in cases]  # type: ignore[arg-type]
    return statistics.median(gaps) if gaps else math.nan


def write(cases: list[dict[str, object]], args: argparse.Namespace, started: Started,
          began: float, num_cases: int) -> None:
    """The table of the cases done so far, in `args.out`/ilp_layouts.md."""
    table: list[dict[str, object]] = []
    for c in cases:
        rows = c["rows"]
        assert isinstance(rows, dict)
        cells: dict[str, object] = {"profile": c["profile"], "level": f"{c['level']:g}p",
                                    "limit": f"{c['limit']:g}"}
        for name in LAYOUTS:
            r = rows[name]
            cells[f"{name}: heuristic"] = f"{r['heuristic']:.1f}"
            cells[f"{name}: ilp"] = f"{r['ilp']:.1f} ({r['status']})"
            scope = "" if r["scope"] == SCOPE_ALL else " FIFO"
            cells[f"{name}: bound"] = f"{r['bound']:.1f}{scope}"
            cells[f"{name}: CPU s"] = f"{r['cpu_s']:.0f}"
        cells["best"] = f"{c['best']:.1f}"
        cells["bound over both"] = f"{c['bound']:.1f}"
        cells["gap"] = f"{100 * float(c['gap']):.2f}%"  # type: ignore[arg-type]
        table.append(cells)
    print(" | ".join(map(str, table[-1].values())), flush=True)
    median = _median(cases)
    header = result_header(command_line("benchmarks.ilp_layouts"), started=started,
                           budget=f"deterministic (CP-SAT work limit {args.deterministic:g} "
                           "per model; the CPU s columns are measured)")
    text = ("\n".join(header) + "\n"
            f"`--method ilp` per layout where memory binds; "
            f"{time.perf_counter() - began:.0f} s wall so far, {len(cases)} of {num_cases} "
            "cases.\n\n"
            "Limit = level * p * m_b of the one-chunk profile; `1`: one stage per rank, "
            "`v`: the V cut (two chunks per rank, half a stage's activations each). Per "
            "layout: the heuristic's cost (`heuristic_orders`), `--method ilp`'s "
            f"(`solving.refine`, CP-SAT on one worker, seed 0, {args.deterministic:g} "
            "deterministic seconds, and as many for the memory relaxation), and the "
            "layout's bound: the largest of the closed forms and the memory relaxation "
            "(over every schedule of the layout) and the exact model's (marked FIFO where "
            "it is the largest: over FIFO orders of the layout only). `bound over both`: "
            "the smaller of the two layouts' bounds; `gap`: (best - bound over both) / "
            f"best. Median gap: {100 * median:.2f}%.\n\n"
            + "\n".join(markdown_table(table)) + "\n")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ilp_layouts.md").write_text(text)


if __name__ == "__main__":
    raise SystemExit(main())
