"""The partition benchmark: ppsched's cut against the even split, torchtitan's rule and
Megatron's best first/last-stage adjustment, on the DERIVED per-layer profiles of
profiles/layers/ (benchmarks/layer_profiles.py), at 1p and 0.5p memory.

1p is the activation memory 1F1B needs on its busiest rank with the even split (the
files' memory_limit); 0.5p is half of it. Step time is the heuristic's makespan (ms, from
the derived per-layer times), peak memory the busiest rank's (GiB). Every figure is
deterministic (the heuristic and the simulator), so the table repeats on any load.

    python -m benchmarks.partition    # writes benchmarks/results/partition.md
"""

from __future__ import annotations

import math
from pathlib import Path

from ppsched.solver.model import LayerProfile, load_layers, parse_layers
from ppsched.solver.partition import Partition, partition

from benchmarks.result_header import result_header, start

WRITES = ("partition.md",)
MEASURES = ("solver/model", "solver/sim", "solver/heuristic", "solver/generators",
            "solver/solving", "solver/partition", "profiles/layers", "benchmarks/partition.py")

ROOT = Path(__file__).resolve().parent.parent
PROFILES = sorted((ROOT / "profiles" / "layers").glob("*.json"))
OUT = ROOT / "benchmarks" / "results" / "partition.md"
MEMORY = (("1p", 1.0), ("0.5p", 0.5))


def at_memory(layers: LayerProfile, factor: float) -> LayerProfile:
    limit = layers.memory_limit
    assert isinstance(limit, float), "the derived profiles carry 1p as one number"
    return parse_layers({**layers.model_dump(mode="json"), "memory_limit": limit * factor})


def _cell(x: float, digits: str) -> str:
    return "no fit" if math.isinf(x) else format(x, digits)


def rows_of(name: str, memory: str, found: Partition) -> list[str]:
    best = found.best.step_time
    rows = []
    for c in found.compared:
        # ppsched is never worse than a rule (it judges their cuts too): checked here.
        if c.judged is None:
            rows.append(f"| {name} | {memory} | {c.label} | - | - | - | (no cut) |")
            continue
        assert best <= c.judged.step_time + 1e-9 * best, (name, memory, c.label)
        ratio = "" if math.isinf(c.judged.step_time) else f"{c.judged.step_time / best:.3f}"
        rows.append(f"| {name} | {memory} | {c.label} | {_cell(c.judged.step_time, '.1f')} | "
                    f"{ratio} | {_cell(c.judged.peak_memory, '.2f')} | "
                    f"{' '.join(map(str, c.judged.cut))}"
                    + (f" ({c.note})" if c.note else "") + " |")
    return rows


def main() -> int:
    started = start()
    lines = ["# Partition: ppsched's cut against the rules users have", "",
             "Per-layer profiles: profiles/layers/, DERIVED from FLOP and activation "
             "formulas at an assumed throughput (each file's description), NOT MEASURED. "
             "1p = the activation memory 1F1B needs on its busiest rank with the even "
             "split; 0.5p = half. Step time: the heuristic's makespan (ms) on the cut; "
             "peak: the busiest rank's activation memory (GiB). Megatron: the best "
             "`--decoder-first/last-pipeline-num-layers A/B` (A, B at most the middle "
             "stages' count, which must divide evenly), judged the same way.", "",
             "| profile | memory | cut | step time (ms) | vs ppsched | peak (GiB) | "
             "layers per stage |",
             "| --- | --- | --- | ---: | ---: | ---: | --- |"]
    notes = []
    for path in PROFILES:
        base = load_layers(path)
        for memory, factor in MEMORY:
            found = partition(at_memory(base, factor))
            lines += rows_of(base.label, memory, found)
            above = found.best.step_time / found.lower_bound - 1
            notes.append(f"- {base.label} at {memory}: lower bound {found.lower_bound:.1f} "
                         f"over every cut (ppsched's step time {above:.1%} above it); "
                         + ("best under the heuristic over every cut" if found.proven else
                            "best of the cuts judged (not proven over every cut)")
                         + f"; {found.judged} cuts judged.")
    lines += ["", "Bounds (the dynamic program's least cut bound; it holds over every "
              "contiguous cut, one stage per rank, and every schedule of it):", "", *notes]
    # The header comes first in the file and last in time: it records the run's CPU.
    lines = [*result_header("python -m benchmarks.partition", budget="deterministic "
                            "(the heuristic and the simulator; no time budget)",
                            started=started), *lines]
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
