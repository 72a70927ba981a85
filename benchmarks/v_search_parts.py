"""Where the V search's time goes at p=32, m=256, beside the single-chunk search.

Run: ``python -m benchmarks.v_search_parts [--repeat N] [--out DIR]``.

Issue 11 asks for the V search within 1.5x the single-chunk search's time at p=32,
m=256 (`benchmarks/v_placement.py` measures the ratio on every profile). This benchmark
times, side by side (the columns take turns, best of N), on `gpt28.3b-p32-m256` cut in V
placement at 1p and 2p of its one-chunk limit, the parts any V search that keeps its
answers must pay for:

- ``single``: the single-chunk search (`solve.heuristic_orders` on the one-chunk profile);
- ``V search``: the same on the V cut (what `v_placement` times);
- ``ZB-V generate`` and ``ZB-V time``: the ZB-V generator's 49k ops, and timing them op
  by op (`chunked_timing.time_chunked_order`): the V search must know ZB-V's cost, as
  its answer is never worse than ZB-V's;
- ``answer build``: where the V answer is a greedy build, that build alone, with no
  incumbent to race (`greedy.greedy_timed`): the least a search that finds it pays.

Writes ``benchmarks/results/v_search_parts.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from ppsched.solver.generators import REGISTRY
from ppsched.solver.heuristic.chunked_timing import time_chunked_order
from ppsched.solver.heuristic.greedy import FILL_CHOICES, MEMORY_CAPS, GreedyKnobs, greedy_timed
from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.ops import Orders
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.solving.pipeline import heuristic_orders

from benchmarks.markdown_table import markdown_table
from benchmarks.result_header import command_line, result_header, start

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("v_search_parts.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "profiles/gpt28.3b-p32-m256.json", "benchmarks/v_search_parts.py",
)
PROFILE = ROOT / "profiles" / "gpt28.3b-p32-m256.json"


def _answer_knobs(problem: Problem, orders: Orders) -> GreedyKnobs | None:
    """The greedy knobs whose build (unraced) gives exactly `orders`, if any."""
    for deep_first in (True, False):
        for cap in MEMORY_CAPS:
            for fill in FILL_CHOICES:
                knobs = GreedyKnobs(fill, deep_first, cap)
                built = greedy_timed(problem, knobs)
                if not isinstance(built, str) and built[0] == orders:
                    return knobs
    return None


def _best_of(parts: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Each part's best wall time over `repeat` rounds, the parts taking turns."""
    best = dict.fromkeys(parts, math.inf)
    for _ in range(repeat):
        for name, run in parts.items():
            began = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - began)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    data = json.loads(PROFILE.read_text())
    started = start()
    rows = []
    for multiple in (1, 2):
        one = parse_profile({**data, "memory_limit": data["memory_limit"] * multiple})
        v = with_chunks(one, 2, "v").problem
        orders, source, value = heuristic_orders(v)
        zb_v = REGISTRY["zb-v"](v)
        knobs = _answer_knobs(v, orders) if source == "greedy-heuristic" else None
        parts: dict[str, Callable[[], object]] = {
            "single": partial(heuristic_orders, one.problem),
            "V search": partial(heuristic_orders, v),
            "ZB-V generate": partial(REGISTRY["zb-v"], v),
            "ZB-V time": partial(time_chunked_order, v, zb_v),
        }
        if knobs is not None:
            parts["answer build"] = partial(greedy_timed, v, knobs)
        seconds = _best_of(parts, args.repeat)
        single = seconds["single"]
        zb_v_s = seconds["ZB-V generate"] + seconds["ZB-V time"]
        answer_s = seconds.get("answer build", math.nan)
        rows.append({
            "memory": f"{multiple}p",
            "V answer": f"{value:.1f} ({source}{f', {knobs}' if knobs else ''})",
            "ops": sum(map(len, orders)),
            "single s": f"{single:.4f}",
            "V search s": f"{seconds['V search']:.4f}",
            "ZB-V generate s": f"{seconds['ZB-V generate']:.4f}",
            "ZB-V time s": f"{seconds['ZB-V time']:.4f}",
            "answer build s": "-" if math.isnan(answer_s) else f"{answer_s:.4f}",
            "V search / single": f"{seconds['V search'] / single:.2f}",
            "ZB-V (generate + time) / single": f"{zb_v_s / single:.2f}",
            "answer build / single": "-" if math.isnan(answer_s)
            else f"{answer_s / single:.2f}",
        })
        print(rows[-1], flush=True)
    lines = [*result_header(command_line("benchmarks.v_search_parts", argv), started=started,
                            budget="wall (the seconds are wall time; the answers "
                            "deterministic)"),
             f"`gpt28.3b-p32-m256` in V placement (64 stages): seconds are the best of "
             f"{args.repeat}, the columns taking turns, cores shared.",
             "", *markdown_table(rows)]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "v_search_parts.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
