"""Bubble rate against the memory limit (the Zero Bubble paper's Figure 9 setting).

Run: ``python -m benchmarks.bubble_memory [--quick]``. For each profile and each memory
limit from 0.25p to 2p (multiples of the profile's 1p limit, ``p * m_b``) it records:

- the single-chunk heuristic (``--layouts 1``);
- the best heuristic over the layouts 1 and V (``--layouts 1,v``);
- ``--method ilp --work-limit 10`` (and ``60`` on the first profile only) as the product
  refines (`ppsched.solver.solving.refine`, from the best heuristic of the layouts the
  default solve considers), with CP-SAT on one worker, seed 0: the whole search shares
  that budget of CP-SAT's *deterministic* time, so every figure repeats exactly whatever
  the machine's load;
- the general lower bound over every one-chunk schedule, and the one `solve` prints:
  over every schedule of every layout the default solve considers.

Writes ``benchmarks/results/bubble_memory.{md,csv,png}``.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

from ppsched.solver.exact.frame import ExactResult
from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.profile import Profile, load_profile
from ppsched.solver.solving.layout_bounds import LayoutBounds, layout_of
from ppsched.solver.solving.layouts import (
    DEFAULT_LAYOUTS,
    candidate_profiles,
    default_layouts,
    layout_name,
)
from ppsched.solver.solving.method_names import HEURISTIC, ILP
from ppsched.solver.solving.pipeline import heuristic_orders
from ppsched.solver.solving.refine import ExactOptions
from ppsched.solver.solving.refine import refine as solving_refine

from benchmarks.bubble_table import with_limit_multiple
from benchmarks.markdown_table import markdown_table
from benchmarks.result_header import Started, command_line, result_header, start

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("bubble_memory.md", "bubble_memory.csv", "bubble_memory.png")
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "solver/exact", "profiles/gpt*.json", "benchmarks/bubble_table.py",
    "benchmarks/bubble_memory.py",
)
RESULTS = ROOT / "benchmarks" / "results"
PROFILES = ("gpt1.5b-p8-m24", "gpt14.6b-p16-m48", "gpt28.3b-p32-m96")
MULTIPLES = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
DERIVED = ("gpt6.2b", "gpt14.6b")


def best_heuristic(profile: Profile, layouts: tuple) -> tuple[Profile, list, float, str]:
    """The best heuristic schedule over `layouts`: (profile, orders, cost, layout name)."""
    best = None
    for cut in candidate_profiles(profile, HEURISTIC, layouts):
        orders, _, value = heuristic_orders(cut.problem)
        if best is None or value < best[2] - 1e-9:
            best = (cut, orders, value, layout_of(cut))
    assert best is not None
    return best


def bubble(cost: float, busy: float) -> float:
    """(cost - busiest rank's op time) / cost, rounded; 0.0, not -0.0, where they meet."""
    return round((cost - busy) / cost, 4) + 0.0


def refine(profile: Profile, orders: list, budget: float) -> ExactResult:
    """`--method ilp --work-limit budget` from `orders`, as the product refines (CP-SAT on
    one worker, seed 0): the budget is the whole search's deterministic time."""
    return solving_refine(profile, orders, "cost",
                          ExactOptions(workers=1, seed=0, work_limit=budget))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="first profile, ILP 10 only")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw the plot from the committed CSV; run nothing")
    args = parser.parse_args()
    if args.plot_only:
        with (RESULTS / "bubble_memory.csv").open() as handle:
            saved = list(csv.DictReader(handle))
        names = tuple(dict.fromkeys(str(r["config"]) for r in saved))
        plot(saved, names, RESULTS / "bubble_memory.png")  # type: ignore[arg-type]
        return
    profiles = PROFILES[:1] if args.quick else PROFILES
    started = start()
    began = time.perf_counter()
    rows = []
    for index, name in enumerate(profiles):
        base = load_profile(ROOT / "profiles" / f"{name}.json")
        budgets = (10.0, 60.0) if index == 0 and not args.quick else (10.0,)
        for multiple in MULTIPLES:
            profile = with_limit_multiple(base, multiple)
            problem = profile.problem
            busy = problem.simple_lower_bound
            row: dict[str, object] = {"config": name, "memory": f"{multiple:g}p",
                                      "limit": profile.memory_limit}
            _, _, single, _ = best_heuristic(profile, ((1, None),))
            _, _, best_cost, best_layout = best_heuristic(profile, ((1, None), (2, "v")))
            row.update({"heuristic": round(single, 1),
                        "heuristic bubble": round((single - busy) / single, 4),
                        "layouts 1,v": round(best_cost, 1), "layout": best_layout,
                        "layouts bubble": round((best_cost - busy) / best_cost, 4)})
            cut, orders, _, chosen = best_heuristic(
                profile, default_layouts(profile, "ilp") or ((1, None),))
            for budget in (10.0, 60.0):
                key = f"ilp {budget:g}"
                if budget not in budgets:
                    row.update({key: "", f"{key} bubble": "", f"{key} status": ""})
                    continue
                result = refine(cut, orders, budget)
                assert result.objective is not None
                row.update({key: round(result.objective, 1),
                            f"{key} bubble": round((result.objective - busy) / result.objective,
                                                   4),
                            f"{key} status": f"{result.status} ({chosen}, {result.backend})"})
                print(name, multiple, key, row[key], row[f"{key} status"], flush=True)
            single_bound = lower_bound(problem)
            row["lower bound"] = round(single_bound, 1)
            row["bound bubble"] = bubble(single_bound, busy)
            # What `solve` prints: over every schedule of every layout it considers.
            considered = candidate_profiles(profile, ILP, ())
            layouts_bound = LayoutBounds.of(considered).overall()
            row["layouts bound"] = round(layouts_bound, 1)
            row["layouts bound bubble"] = bubble(layouts_bound, busy)
            rows.append(row)
    wall = time.perf_counter() - began
    write(rows, profiles, wall, started, args.quick)


def write(rows: list[dict[str, object]], profiles: tuple[str, ...], wall: float,
          started: Started, quick: bool) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = "bubble_memory_quick" if quick else "bubble_memory"
    columns = list(rows[0])
    with (RESULTS / f"{stem}.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    derived = [p for p in profiles if p.startswith(DERIVED)]
    names = ", ".join(layout_name(layout) for layout in DEFAULT_LAYOUTS)
    lines = [
        *result_header(command_line("benchmarks.bubble_memory"), started=started,
                       budget="deterministic (CP-SAT work limits of 10 / 60)"),
        f"Bubble rate against the memory limit (the paper's Figure 9 setting); {wall:.0f} s "
        "of wall time in all.",
        "",
        "Memory is a multiple of the profile's 1p limit (p * m_b). `heuristic`: one stage "
        "per rank; `layouts 1,v`: the best of one chunk and the V cut; `ilp 10` / `ilp 60`: "
        "`--method ilp --work-limit 10` / `60` as the product refines "
        "(`ppsched.solver.solving.refine`) from the best heuristic of the layouts the "
        "default solve considers, CP-SAT on one worker, seed 0: the whole search (relaxation, "
        "phases, windows) shares 10 / 60 units of CP-SAT's deterministic time (not wall "
        "time: the figures repeat on any load). ILP 60 only for the first profile. "
        "Bubble rate is "
        "(cost - busiest rank's op time) / cost; `lower bound` holds over every "
        "one-chunk schedule, `layouts bound` over every schedule of every layout the "
        f"default solve considers ({names}; closed forms, as `ppsched solve` prints it "
        "without `--method ilp`).",
    ]
    if derived:
        lines += ["", f"The {', '.join(derived)} profiles are derived from the paper's "
                  "configurations, not measured."]
    lines += ["", *markdown_table(rows)]
    (RESULTS / f"{stem}.md").write_text("\n".join(lines) + "\n")
    plot(rows, profiles, RESULTS / f"{stem}.png")


def plot(rows: list[dict[str, object]], profiles: tuple[str, ...], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(profiles), figsize=(5 * len(profiles), 4), squeeze=False)
    # Fixed colours: a series missing on one profile must not shift the others' colours.
    series = (("heuristic bubble", "heuristic, 1 chunk", "C0"),
              ("layouts bubble", "heuristic, 1 or V", "C1"),
              ("ilp 10 bubble", "ilp, 10 det. s", "C2"), ("ilp 60 bubble", "ilp, 60 det. s", "C3"),
              ("bound bubble", "lower bound (1 chunk)", "C4"),
              ("layouts bound bubble", "lower bound (layouts)", "C5"))
    for ax, name in zip(axes[0], profiles, strict=True):
        mine = [r for r in rows if r["config"] == name]
        x = [float(str(r["memory"]).rstrip("p")) for r in mine]
        for key, label, colour in series:
            points = [(a, float(str(r[key]))) for a, r in zip(x, mine, strict=True)
                      if r[key] != ""]
            if points:
                ax.plot([a for a, _ in points], [b for _, b in points], marker="o",
                        label=label, color=colour)
        ax.legend(fontsize=7)
        ax.set_title(name)
        ax.set_xlabel("memory limit (multiples of p * m_b)")
        ax.set_ylabel("bubble rate")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
