"""The WeiPipe slides' 16-GPU throughput table, replayed through the advisor.

Run: ``python -m benchmarks.weipipe_slides [--num-microbatches N] [--mfu X] [--out DIR]``.

For each of the slides' nine settings (32 layers, 32 heads, H in {1024, 2048, 4096},
S in {4096, 8192, 16384} with G = 65536/S; 16 A800-like GPUs, 312 TFLOP/s bf16 and 80 GB
each, two nodes of 8 with NVLink inside and 10 GbE across) it ranks 1F1B, ZB-1p and ZB-2p
(the ZB heuristic at 1F1B's and at twice 1F1B's activation memory), FSDP and WeiPipe
(WeiPipe-Interleave, the variant the slides evaluate) with the advisor, and compares with
the published figures: is the order of the five strategies by throughput (out-of-memory
last) the same, is the winner the same, and the ratio of predicted to published
tokens/s/GPU. A predicted out-of-memory where the slides report a throughput (or the
reverse) breaks the order; whether the same strategies fit is counted on its own
(feasibility agreement). Assumptions the slides leave open are printed with the result:
N (microbatches per step; default 64, 4 per GPU) and mfu (default 0.5) are arguments;
recomputation for 1F1B, FSDP and WeiPipe (the slides: "1F1B maintains low memory due to
Flash Attention and recomputation"), none for ZB (Megatron's ZB runs out of memory in the
slides), and FSDP's collectives not hidden behind compute. The counts are repeated with one
assumption moved at a time (`VARIANTS`). Writes ``benchmarks/results/weipipe_slides.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ppsched.solver.advisor.assumptions import format_value, set_field
from ppsched.solver.advisor.rank import Candidate, advise, parse_advisor_config

from benchmarks.result_header import command_line, result_header, start

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("weipipe_slides.md",)
MEASURES = (
    "solver/advisor", "solver/weipipe", "solver/model", "solver/sim",
    "benchmarks/weipipe_slides.py",
)
NAMES = {"1f1b": "1F1B", "zb-1p": "ZB1", "zb-2p": "ZB2", "fsdp": "FSDP",
         "weipipe-interleave": "WeiPipe"}
OOM = None

# The slides' table "16 GPU, Nvlink and ethernet connection": (H, S, G) -> tokens/s/GPU of
# 1F1B, ZB1, ZB2, FSDP, WeiPipe (None: out of memory), then the memory (GB) columns.
PUBLISHED: dict[tuple[int, int, int], tuple[tuple[float | None, ...], tuple[float | None, ...]]] = {
    (1024, 4096, 16): ((8581.7, 7547.0, 7638.5, 11525.9, 15138.8), (13.0, 20.4, 39.3, 8.6, 9.4)),
    (1024, 8192, 8): ((7403.8, 6739.6, 6768.1, 9424.4, 12122.3), (9.9, 10.7, 20.5, 8.6, 9.4)),
    (1024, 16384, 4): ((5641.2, 5651.6, 5651.9, 6973.6, 8188.3), (9.1, 21.6, 42.2, 8.6, 9.4)),
    (2048, 4096, 16): ((4163.2, 3823.3, OOM, 4104.8, 6499.7), (18.7, 44.3, OOM, 17.9, 19.9)),
    (2048, 8192, 8): ((3791.3, 3517.8, OOM, 3706.8, 6033.2), (19.6, 22.3, OOM, 17.9, 19.9)),
    (2048, 16384, 4): ((3146.3, 3050.1, OOM, 3087.2, 4607.8), (22.9, 42.9, OOM, 17.9, 19.9)),
    (4096, 4096, 16): ((1662.7, OOM, OOM, 1110.5, 2023.1), (40.5, OOM, OOM, 39.0, 44.5)),
    (4096, 8192, 8): ((1556.2, OOM, OOM, 1063.2, 2059.4), (41.6, OOM, OOM, 39.0, 44.5)),
    (4096, 16384, 4): ((1331.6, OOM, OOM, 944.2, 1684.9), (45.1, OOM, OOM, 39.0, 44.5)),
}


# The assumptions the slides leave open, as advisor config fields; BASE is the replay's.
BASE: dict[str, Any] = {"num_microbatches": 64, "cluster.mfu": 0.5,
                        "recompute": ["1f1b", "fsdp", "weipipe-interleave"],
                        "fsdp_overlap": False}
# One assumption moved at a time: does the agreement hold?
VARIANTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("as assumed above", {}),
    ("N = 16 (one per GPU)", {"num_microbatches": 16}),
    ("mfu 0.35", {"cluster.mfu": 0.35}),
    ("recompute for all five", {"recompute": True}),
    ("recompute for none", {"recompute": False}),
    ("FSDP overlap (the advisor's default)", {"fsdp_overlap": True}),
)


def config(h: int, s: int, g: int, assumed: dict[str, Any]) -> dict[str, Any]:
    """The advisor config of one setting under `assumed` (dotted fields, as BASE)."""
    data: dict[str, Any] = {
        "name": f"slides-h{h}-s{s}",
        "model": {"layers": 32, "hidden": h, "heads": 32, "seq_len": s,
                  "microbatch_size": g, "vocab": 32000},
        "cluster": {"num_gpus": 16, "gpus_per_node": 8, "gpu_tflops": 312.0,
                    "gpu_memory_gb": 80.0, "intra_node_gbps": 200.0,
                    "inter_node_gbps": 1.25, "latency_us": 10.0},
        "strategies": list(NAMES),
    }
    for name, value in assumed.items():
        data = set_field(data, name, value)
    return data


def order(values: dict[str, float | None]) -> list[str]:
    """Strategies by throughput, best first; out-of-memory ones last (alphabetical)."""
    fits = sorted((k for k, v in values.items() if v is not None),
                  key=lambda k: -(values[k] or 0.0))
    return fits + sorted(k for k, v in values.items() if v is None)


def same_order(a: dict[str, float | None], b: dict[str, float | None]) -> bool:
    """The same strategies run out of memory and the others rank the same: a predicted
    out-of-memory where the other side reports a throughput is a mismatch."""
    return order(a) == order(b) and feasible(a) == feasible(b)


def feasible(values: dict[str, float | None]) -> set[str]:
    return {k for k, v in values.items() if v is not None}


def _fmt_order(names: list[str], values: dict[str, float | None]) -> str:
    fits = [n for n in names if values[n] is not None]
    oom = [n for n in names if values[n] is None]
    return " > ".join(fits) + (f" ({', '.join(oom)} OOM)" if oom else "")


@dataclass
class Agreement:
    """One replay of the nine rows: counts of agreement and the tables' rows."""

    same_order: int = 0
    same_winner: int = 0
    same_feasibility: int = 0  # rows whose set of strategies that fit agrees
    cells_feasibility: int = 0  # (row, strategy) cells whose fit / OOM agrees, of 45
    rank_rows: list[str] = field(default_factory=list)
    ratio_rows: list[str] = field(default_factory=list)
    mem_rows: list[str] = field(default_factory=list)


def compare(assumed: dict[str, Any]) -> Agreement:
    """The nine rows replayed under `assumed`."""
    out = Agreement()
    for (h, s, g), (published, published_mem) in PUBLISHED.items():
        ranked = advise(parse_advisor_config(config(h, s, g, assumed)))
        by_name: dict[str, Candidate] = {c.strategy: c for c in ranked}
        pred = {NAMES[k]: (c.tokens_per_s_per_gpu if c.fits else None)
                for k, c in by_name.items()}
        pub = dict(zip(NAMES.values(), published, strict=True))
        po, pp = order(pub), order(pred)
        row_order = same_order(pub, pred)
        row_winner = po[0] == pp[0] and pub[po[0]] is not None and pred[pp[0]] is not None
        row_feasible = feasible(pub) == feasible(pred)
        out.same_order += row_order
        out.same_winner += row_winner
        out.same_feasibility += row_feasible
        out.cells_feasibility += sum((pub[n] is None) == (pred[n] is None) for n in pub)
        out.rank_rows.append(
            f"| {h} | {s} | {g} | {_fmt_order(po, pub)} | {_fmt_order(pp, pred)} | "
            f"{'yes' if row_order else 'no'} | {'yes' if row_winner else 'no'} | "
            f"{'yes' if row_feasible else 'no'} |")
        cells = []
        for name in NAMES.values():
            a, b = pred[name], pub[name]
            if a is not None and b is not None:
                cells.append(f"{a:.0f} / {b:.0f} = {a / b:.2f}")
            else:
                cells.append(f"{'OOM' if a is None else f'{a:.0f}'} / "
                             f"{'OOM' if b is None else f'{b:.0f}'}")
        out.ratio_rows.append(f"| {h} | {s} | {g} | " + " | ".join(cells) + " |")
        mem = []
        for key, name in NAMES.items():
            c = by_name[key]
            b = dict(zip(NAMES.values(), published_mem, strict=True))[name]
            mem.append(f"{c.peak_memory_gb:.1f} / {'OOM' if b is None else f'{b:.1f}'}")
        out.mem_rows.append(f"| {h} | {s} | {g} | " + " | ".join(mem) + " |")
    return out


def _assumed_text(assumed: dict[str, Any]) -> str:
    return ", ".join(f"`{k}: {format_value(v)}`" for k, v in assumed.items())


def run(assumed: dict[str, Any]) -> str:
    """The result file's text: the tables under `assumed`, then the agreement counts with
    one assumption moved at a time."""
    began = time.process_time()
    base = compare(assumed)
    variants = [(label, compare({**assumed, **change})) for label, change in VARIANTS]
    cpu = time.process_time() - began
    load = os.getloadavg()
    heads = " | ".join(NAMES.values())
    rows = len(PUBLISHED)
    cells = rows * len(NAMES)
    lines = [
        "The WeiPipe slides' 16-GPU table (NVLink within 8, 10 GbE across) replayed "
        "through `ppsched advise`. Predicted figures come from the advisor's formulas and "
        "simulators, published ones from the slides. Assumed (the advisor's config fields; "
        f"the slides leave them open): {_assumed_text(assumed)}; vocabulary 32000; WeiPipe "
        "is WeiPipe-Interleave; ZB1/ZB2 are the ZB heuristic at 1p/2p memory.",
        "",
        "Order agreement: the same strategies run out of memory and the rest rank the same "
        "by throughput (a predicted out-of-memory where the slides report a throughput, or "
        "the reverse, is a mismatch). Feasibility agreement: the same strategies fit, "
        "order aside.",
        "",
        f"Order of the five by throughput (best first): same in {base.same_order} of "
        f"{rows} rows, same winner in {base.same_winner} of {rows}. Feasibility (fit or "
        f"out of memory): same in {base.same_feasibility} of {rows} rows, "
        f"{base.cells_feasibility} of {cells} strategy cells.",
        "",
        "| H | S | G | published order | predicted order | same order | same winner | "
        "same feasibility |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        *base.rank_rows,
        "",
        "Agreement with one assumption moved (the others as above):",
        "",
        f"| assumptions | same order (of {rows}) | same winner (of {rows}) | same "
        f"feasibility (of {rows}) | feasibility cells (of {cells}) |",
        "| --- | --- | --- | --- | --- |",
        *(f"| {label} | {a.same_order} | {a.same_winner} | {a.same_feasibility} | "
          f"{a.cells_feasibility} |" for label, a in variants),
        "",
        "Tokens/s/GPU, predicted / published = ratio:",
        "",
        f"| H | S | G | {heads} |",
        "| --- | --- | --- | " + " | ".join("---" for _ in NAMES) + " |",
        *base.ratio_rows,
        "",
        "Peak memory per GPU, GB, predicted / published (80 GB fit):",
        "",
        f"| H | S | G | {heads} |",
        "| --- | --- | --- | " + " | ".join("---" for _ in NAMES) + " |",
        *base.mem_rows,
        "",
        f"Ran in {cpu:.1f} s of CPU on {platform.machine()} ({os.cpu_count()} CPUs), load "
        f"average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-microbatches", type=int, default=BASE["num_microbatches"])
    parser.add_argument("--mfu", type=float, default=BASE["cluster.mfu"])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    started = start()
    body = run({**BASE, "num_microbatches": args.num_microbatches, "cluster.mfu": args.mfu})
    # The header after the run: it takes the load and the CPU time at both ends.
    text = "\n".join(result_header(command_line("benchmarks.weipipe_slides"), started=started,
                                    budget="deterministic (the advisor's formulas and "
                                    "simulators; no time limit)")) + "\n" + body
    print(text, end="")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "weipipe_slides.md").write_text(text)


if __name__ == "__main__":
    main()
