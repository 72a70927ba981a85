"""Issue 12's Done-when figures: offload buys ZB-2p's bubble at 1F1B's memory.

Run: ``python -m benchmarks.offload_targets [--profile PATH] [--out DIR]``. Writes
``benchmarks/results/offload_targets.md`` (the README's block is a copy of it).

On gpt1.5b-p8-m24 (the Zero Bubble paper's measured times) with offload available at
k = 0.5 (`solver.offload_sizing.with_offload`: t_offload = t_reload = 0.5 (t_f + t_b)
per stage), the solver's heuristic (`ppsched solve --method heuristic`, which chooses a
policy per activation) at 0.5p and 1p memory, beside the keep-only heuristic at 1p and
2p (the targets: within 5% of the 1p figure at 0.5p, within 2% of the 2p figure at 1p).
Each layout is solved on its own (one chunk per rank, V, loop2) and by `solve`'s default
(the layouts it tries by itself). Every schedule is validated by the simulator; the
figures are simulated times (ms, the profile's unit), not wall time.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.offload_sizing import with_offload
from ppsched.solver.model.profile import Profile, load_profile, parse_profile
from ppsched.solver.model.schedule import Schedule
from ppsched.solver.policies.fit import count_policies
from ppsched.solver.sim.simulator import validate
from ppsched.solver.solving.entry import solve
from ppsched.solver.solving.layouts import Layout, layout_name

from benchmarks.result_header import command_line, result_header, start

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("offload_targets.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "profiles/gpt1.5b-p8-m24.json", "benchmarks/offload_targets.py",
)
PROFILE = ROOT / "profiles" / "gpt1.5b-p8-m24.json"
RATIO = 0.5
# (memory in units of p * m_b, the keep-only reference memory, allowed excess)
TARGETS = ((0.5, 1.0, 0.05), (1.0, 2.0, 0.02))
LAYOUTS: tuple[tuple[Layout, ...], ...] = ((), ((1, None),), ((2, "v"),), ((2, "loop"),))


def at_memory(profile: Profile, units: float) -> Profile:
    """`profile` with its limit at `units` times p * m_b (m_b of stage 0)."""
    m_b = profile.m_b if isinstance(profile.m_b, float | int) else profile.m_b[0]
    # Re-validated (model_copy would keep the cached, resolved problem of the original).
    return parse_profile({**profile.model_dump(mode="json"),
                          "memory_limit": units * profile.num_ranks * m_b})


def checked(profile: Profile, layouts: tuple[Layout, ...]) -> Schedule:
    """`solve` with the heuristic, re-validated here by the simulator."""
    schedule = solve(profile, "heuristic", layouts=layouts)
    assert schedule.metrics is not None
    echoed = Profile.model_validate(schedule.profile.model_dump())
    validate(echoed.problem, schedule.orders())
    return schedule


def rows(path: Path) -> tuple[list[str], list[str]]:
    """The table's lines, and one phrase per keep-only reference: its cost beside the
    lower bound the solver proves for it (`solver.model.bounds.lower_bound`)."""
    base = load_profile(path)
    references: list[str] = []
    offload = with_offload(base, RATIO)
    out = ["| memory | layout | keep only | with offload (k = 0.5) | offloaded | "
           "keep-only reference | ratio | target | met |", "|---" * 9 + "|"]
    for units, reference_units, allowed in TARGETS:
        reference = checked(at_memory(base, reference_units), ((1, None),))
        assert reference.metrics is not None
        ref_cost = reference.metrics.cost
        bound = lower_bound(at_memory(base, reference_units).problem)
        gap = ref_cost / bound - 1
        references.append(f"{ref_cost:.1f} at {reference_units:g}p, lower bound {bound:.1f}"
                          + (" (proven optimal)" if gap <= 1e-9 else f" (gap {gap:.2%})"))
        for layouts in LAYOUTS:
            name = "default" if not layouts else layout_name(layouts[0])
            keep = checked(at_memory(base, units), layouts)
            mixed = checked(at_memory(offload, units), layouts)
            assert keep.metrics is not None and mixed.metrics is not None
            counts = count_policies(mixed.orders())
            total = sum(1 for ops in mixed.orders() for op in ops if op.kind == "F")
            ratio = mixed.metrics.cost / ref_cost
            met = "yes" if ratio <= 1 + allowed + 1e-12 else "no"
            out.append(f"| {units:g}p | {name} | {keep.metrics.cost:.1f} | "
                       f"{mixed.metrics.cost:.1f} | {counts['offload']}/{total} | "
                       f"{ref_cost:.1f} ({reference_units:g}p, one chunk) | {ratio:.4f} | "
                       f"<= {1 + allowed:.2f} | {met} |")
    return out, references


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", type=Path, default=PROFILE)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    started = start()
    table, references = rows(args.profile)
    text = "\n".join([
        *result_header(command_line("benchmarks.offload_targets"), started=started,
                       budget="deterministic (heuristic, no time limit)"),
        f"Issue 12 targets on {args.profile.stem} (the Zero Bubble paper's measured times), "
        f"offload at k = {RATIO:g}; simulated times (ms), heuristic method.",
        "",
        "A layout other than one chunk per rank re-cuts the model (DESIGN.md section 2); "
        "the keep-only references are the one-chunk heuristic's: "
        + "; ".join(references) + ".",
        "",
        *table, ""])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "offload_targets.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
