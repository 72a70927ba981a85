"""The WeiPipe slides' 16-GPU throughput table, replayed through the advisor.

Run: ``python -m benchmarks.weipipe_slides [--num-microbatches N] [--mfu X] [--out DIR]``.

For each of the slides' nine settings (32 layers, 32 heads, H in {1024, 2048, 4096},
S in {4096, 8192, 16384} with G = 65536/S; 16 A800-like GPUs, 312 TFLOP/s bf16 and 80 GB
each, two nodes of 8 with NVLink inside and 10 GbE across) it ranks 1F1B, ZB-1p and ZB-2p
(the ZB heuristic at 1F1B's and at twice 1F1B's activation memory), FSDP and WeiPipe
(WeiPipe-Interleave, the variant the slides evaluate) with the advisor, and compares with
the published figures: is the order of the five strategies by throughput (out-of-memory
last) the same, is the winner the same, and the ratio of predicted to published
tokens/s/GPU. Assumptions the slides leave open are
arguments and are printed with the result: N (microbatches per step; default 64, 4 per
GPU), mfu (default 0.5), and recomputation for 1F1B, FSDP and WeiPipe (the slides: "1F1B
maintains low memory due to Flash Attention and recomputation"), none for ZB (Megatron's
ZB runs out of memory in the slides). Writes ``benchmarks/results/weipipe_slides.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path
from typing import Any

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


def config(h: int, s: int, g: int, num_microbatches: int, mfu: float,
           fsdp_overlap: bool) -> dict[str, Any]:
    """The advisor config of one setting."""
    return {
        "name": f"slides-h{h}-s{s}",
        "model": {"layers": 32, "hidden": h, "heads": 32, "seq_len": s,
                  "microbatch_size": g, "vocab": 32000},
        "cluster": {"num_gpus": 16, "gpus_per_node": 8, "gpu_tflops": 312.0, "mfu": mfu,
                    "gpu_memory_gb": 80.0, "intra_node_gbps": 200.0,
                    "inter_node_gbps": 1.25, "latency_us": 10.0},
        "num_microbatches": num_microbatches,
        "strategies": list(NAMES),
        "recompute": ["1f1b", "fsdp", "weipipe-interleave"],
        "fsdp_overlap": fsdp_overlap,
    }


def order(values: dict[str, float | None]) -> list[str]:
    """Strategies by throughput, best first; out-of-memory ones last (alphabetical)."""
    fits = sorted((k for k, v in values.items() if v is not None),
                  key=lambda k: -(values[k] or 0.0))
    return fits + sorted(k for k, v in values.items() if v is None)


def _fmt_order(names: list[str], values: dict[str, float | None]) -> str:
    fits = [n for n in names if values[n] is not None]
    oom = [n for n in names if values[n] is None]
    return " > ".join(fits) + (f" ({', '.join(oom)} OOM)" if oom else "")


def compare(num_microbatches: int, mfu: float, fsdp_overlap: bool) -> tuple[
        int, int, list[str], list[str], list[str]]:
    """Rows of the three tables and the counts of rows whose order / winner match."""
    rank_rows, ratio_rows, mem_rows = [], [], []
    same_order = same_winner = 0
    for (h, s, g), (published, published_mem) in PUBLISHED.items():
        ranked = advise(parse_advisor_config(config(h, s, g, num_microbatches, mfu,
                                                    fsdp_overlap)))
        by_name: dict[str, Candidate] = {c.strategy: c for c in ranked}
        pred = {NAMES[k]: (c.tokens_per_s_per_gpu if c.fits else None)
                for k, c in by_name.items()}
        pub = dict(zip(NAMES.values(), published, strict=True))
        po, pp = order(pub), order(pred)
        same_order += po == pp
        same_winner += po[0] == pp[0]
        rank_rows.append(f"| {h} | {s} | {g} | {_fmt_order(po, pub)} | {_fmt_order(pp, pred)}"
                         f" | {'yes' if po == pp else 'no'} | "
                         f"{'yes' if po[0] == pp[0] else 'no'} |")
        cells = []
        for name in NAMES.values():
            a, b = pred[name], pub[name]
            if a is not None and b is not None:
                cells.append(f"{a:.0f} / {b:.0f} = {a / b:.2f}")
            else:
                cells.append(f"{'OOM' if a is None else f'{a:.0f}'} / "
                             f"{'OOM' if b is None else f'{b:.0f}'}")
        ratio_rows.append(f"| {h} | {s} | {g} | " + " | ".join(cells) + " |")
        mem = []
        for key, name in NAMES.items():
            c = by_name[key]
            b = dict(zip(NAMES.values(), published_mem, strict=True))[name]
            mem.append(f"{c.peak_memory_gb:.1f} / {'OOM' if b is None else f'{b:.1f}'}")
        mem_rows.append(f"| {h} | {s} | {g} | " + " | ".join(mem) + " |")
    return same_order, same_winner, rank_rows, ratio_rows, mem_rows


def run(num_microbatches: int, mfu: float) -> str:
    """The result file's text: the tables without FSDP overlap, the counts with it."""
    began = time.perf_counter()
    same_order, same_winner, rank_rows, ratio_rows, mem_rows = compare(
        num_microbatches, mfu, fsdp_overlap=False)
    other = compare(num_microbatches, mfu, fsdp_overlap=True)
    wall = time.perf_counter() - began
    load = os.getloadavg()
    heads = " | ".join(NAMES.values())
    lines = [
        "The WeiPipe slides' 16-GPU table (NVLink within 8, 10 GbE across) replayed "
        "through `ppsched advise` (`python -m benchmarks.weipipe_slides "
        f"--num-microbatches {num_microbatches} --mfu {mfu:g}`). Predicted figures come "
        "from the advisor's formulas and simulators, published ones from the slides. "
        f"Assumed: N = {num_microbatches} microbatches per step, mfu {mfu:g}, vocabulary "
        "32000, recomputation for 1F1B, FSDP and WeiPipe only; WeiPipe is "
        "WeiPipe-Interleave; ZB1/ZB2 are the ZB heuristic at 1p/2p memory; FSDP's "
        "collectives are not hidden behind compute (`fsdp_overlap: false`).",
        "",
        f"Order of the five by throughput (best first): same in {same_order} of 9 rows, "
        f"same winner in {same_winner} of 9. With FSDP's collectives hidden "
        f"(`fsdp_overlap: true`): same order in {other[0]} of 9, same winner in "
        f"{other[1]} of 9.",
        "",
        "| H | S | G | published order | predicted order | same order | same winner |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *rank_rows,
        "",
        "Tokens/s/GPU, predicted / published = ratio:",
        "",
        f"| H | S | G | {heads} |",
        "| --- | --- | --- | " + " | ".join("---" for _ in NAMES) + " |",
        *ratio_rows,
        "",
        "Peak memory per GPU, GB, predicted / published (80 GB fit):",
        "",
        f"| H | S | G | {heads} |",
        "| --- | --- | --- | " + " | ".join("---" for _ in NAMES) + " |",
        *mem_rows,
        "",
        f"Ran in {wall:.1f} s on {platform.machine()} ({os.cpu_count()} CPUs), load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-microbatches", type=int, default=64)
    parser.add_argument("--mfu", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    started = start()
    text = "\n".join(result_header(command_line("benchmarks.weipipe_slides"), started=started,
                                    budget="deterministic (the advisor's formulas and "
                                    "simulators; no time limit)")) + "\n"
    text += run(args.num_microbatches, args.mfu)
    print(text, end="")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "weipipe_slides.md").write_text(text)


if __name__ == "__main__":
    main()
