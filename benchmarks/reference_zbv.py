"""The Zero Bubble authors' own schedulers on our public profiles: their ZB-V and their
one-chunk heuristic, re-timed by our simulator.

Run (the reference is read from a folder outside this repository; none of its code is
in ppsched)::

    # a clone of github.com/sail-sg/zero-bubble-pipeline-parallelism:
    MIRROR=/path/to/zero-bubble-pipeline-parallelism
    REF=/tmp/zbref; S=megatron/core/pipeline_parallel/zerobubble/scheduler
    mkdir -p $REF/$S
    for d in megatron megatron/core megatron/core/pipeline_parallel \\
             megatron/core/pipeline_parallel/zerobubble $S; do : > $REF/$d/__init__.py; done
    for f in graph.py zb.py zbv.py; do git -C $MIRROR show HEAD:$S/$f > $REF/$S/$f; done
    git -C $MIRROR rev-parse HEAD > $REF/COMMIT
    python -m benchmarks.reference_zbv --reference $REF

(the committed result: commit 39f2c186a275 of that repository; its ``zb.py`` imports
torch and pulp, so the one-chunk column needs them installed; without them it is left
out). For every profile of ``profiles/`` at 0.5, 0.75, 1, 1.5 and 2 times its memory
limit (its 1p; where it has none, ``p * max(m_b)``; as `benchmarks.layout_search` reads
them), it writes ``benchmarks/results/reference_zbv.json``: per row the profile, the
``multiple``, the ``limit``, the two costs `benchmarks.layout_search` sets beside ours
(``zbv``, ``heuristic``: null where the scheduler does not fit or its orders are not
valid), and in detail

- ``reference_zbv``: the reference ZB-V (``zbv.PipelineGraph.create_schedule``, their 4
  fill settings, best by their own bubble count) on the profile cut in V (DESIGN.md 6.6:
  each stage's times and memory halved, 2p stages), its orders re-timed by our simulator: ``cost``,
  ``peak_memory`` (the largest rank's), ``valid`` (no violation of DESIGN.md section 3,
  memory included); or ``does_not_fit`` with why (their scheduler stops on an assertion
  where the limit does not hold its warm-up: below 1p on every profile);
- ``reference_heuristic``: their one-chunk heuristic (``zb.initial_solution``, as
  `benchmarks.heuristic_speed` drives it) on the profile itself, alike.

Their ZB-V takes one time per kind, one latency and one memory per kind: as their
runtime does, each kind's middle value over the stages (``avg_then_mid``), the
latencies' middle value, and each stage's largest memory (an order that fits with the
largest fits with the real ones: the memory held is monotone in them). The costs are
ours (their orders timed by our cost model, the stages' own values).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import math
import sys
from fractions import Fraction
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.ops import Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import simulate

from benchmarks.result_header import command_line, header_fields, start, without_paths

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("reference_zbv.json",)
MEASURES = ("solver/model", "solver/sim", "profiles/*.json", "benchmarks/reference_zbv.py")
MULTIPLES = (0.5, 0.75, 1.0, 1.5, 2.0)
SCHEDULER = "megatron.core.pipeline_parallel.zerobubble.scheduler"


def at_multiple(data: dict[str, Any], multiple: float) -> dict[str, Any]:
    """The profile with `multiple` times its memory limit (a number: the public profiles'
    are), or times ``p * max(m_b)`` where it has none."""
    limit = data.get("memory_limit")
    if limit is None:
        m_b = data["m_b"] if isinstance(data["m_b"], (int, float)) else max(data["m_b"])
        limit = data["num_ranks"] * m_b
    return {**data, "memory_limit": round(multiple * limit, 9)}


class Reference:
    """The reference's scheduler modules, imported from `folder` (see the module)."""

    def __init__(self, folder: Path) -> None:
        sys.path.insert(0, str(folder))
        self.zbv = importlib.import_module(f"{SCHEDULER}.zbv")
        self.zb: ModuleType | None = None
        self.graph: ModuleType | None = None
        try:  # the one-chunk heuristic needs torch and pulp (its module imports them)
            self.zb = importlib.import_module(f"{SCHEDULER}.zb")
            self.graph = importlib.import_module(f"{SCHEDULER}.graph")
        except ImportError as exc:
            print(f"reference heuristic left out: {exc}", file=sys.stderr)
        commit = folder / "COMMIT"
        self.commit = commit.read_text().strip() if commit.exists() else None

    def zb_v(self, problem: Problem) -> list[list[Op]]:
        """Their ZB-V's orders for a V-cut problem (raises where it does not fit)."""
        p, m = problem.num_ranks, problem.num_microbatches
        f_mem, w_mem = Fraction(max(problem.m_b)), Fraction(max(problem.m_w))
        # Exact memory arithmetic: their scheduler asserts each op against the limit.
        graph = self.zbv.PipelineGraph(
            p, m, _mid(problem.t_f), _mid(problem.t_b), _mid(problem.t_w),
            _mid(problem.t_comm) if problem.t_comm else 0.0,
            f_mem=f_mem, b_mem=w_mem - f_mem, w_mem=-w_mem,
            max_mem=Fraction(min(problem.memory_limit)))
        with contextlib.redirect_stdout(io.StringIO()):  # it prints its bubble rate
            ranks = graph.create_schedule(SimpleNamespace(max_chunks=2, n_stages=p))
        # Their node's layer_group_idx is our global stage (chunk 0 down, chunk 1 up).
        return [[Op(str(node.type), node.layer_group_idx, node.microbatch)  # type: ignore[arg-type]
                 for node in rank] for rank in ranks]

    def heuristic(self, problem: Problem) -> list[list[Op]]:
        """Their one-chunk heuristic's orders (`benchmarks.heuristic_speed`'s call)."""
        assert self.zb is not None and self.graph is not None
        p, m = problem.num_ranks, problem.num_microbatches
        mem_f = list(problem.m_b)
        mem_b = [w - b for w, b in zip(problem.m_w, problem.m_b, strict=True)]
        mem_w = [-(f + b) for f, b in zip(mem_f, mem_b, strict=True)]
        limit = [x if math.isfinite(x) else 3.0 * m * f
                 for x, f in zip(problem.memory_limit, mem_f, strict=True)]
        config = self.graph.GraphConfig(
            mem_f=mem_f, mem_b=mem_b, mem_w=mem_w, max_mem=limit,
            cost_f=[float(x) for x in problem.t_f], cost_b=[float(x) for x in problem.t_b],
            cost_w=[float(x) for x in problem.t_w],
            cost_comm=float(problem.t_comm[0]) if p > 1 else 0.0, n_stages=p, n_micro=m)
        graph = self.zb.Graph.build_graph(p, m, config)
        with contextlib.redirect_stdout(io.StringIO()):
            _, order, _ = self.zb.initial_solution(graph, print_result=False)
        ranks: list[list[tuple[int, Op]]] = [[] for _ in range(p)]
        for k, kind in enumerate(("F", "B", "W")):
            for s in range(p):
                for j in range(m):
                    ranks[s].append((order[graph.get_id(k, s, j)], Op(kind, s, j)))  # type: ignore[arg-type]
        return [[op for _, op in sorted(rank)] for rank in ranks]


def _mid(values: tuple[float, ...]) -> float:
    """Their runtime's ``avg_then_mid`` over per-stage values: the middle one (without
    its floor of 1, a unit of theirs)."""
    return float(sorted(values)[len(values) // 2])


def timed(problem: Problem, make: Any) -> dict[str, Any]:
    """`make(problem)`'s orders timed by our simulator, or why there are none."""
    try:
        orders = make(problem)
    except (AssertionError, ValueError, IndexError, ZeroDivisionError) as exc:
        # ZB-V's asserts name (kind, chunk, stage, microbatch) of the op it could not place.
        return {"does_not_fit": f"the reference stopped: {type(exc).__name__}: {exc}"[:160]}
    sim = simulate(problem, orders)
    if sim.metrics is None:
        return {"does_not_fit": "orders not timeable: " + str(sim.violations[:1])[:120],
                "valid": False}
    return {"cost": round(sim.metrics.cost, 6), "peak_memory": round(max(sim.memory_peak), 6),
            "valid": sim.ok}


def rows(reference: Reference, folder: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        for multiple in MULTIPLES:
            posted = at_multiple(data, multiple)
            profile = parse_profile(posted)
            zbv = timed(with_chunks(profile, 2, "v").problem, reference.zb_v)
            heuristic = timed(profile.problem, reference.heuristic) \
                if reference.zb is not None else None
            row = {"profile": path.stem, "multiple": multiple,
                   "limit": posted["memory_limit"], "zbv": _cost(zbv),
                   "heuristic": _cost(heuristic), "reference_zbv": zbv,
                   "reference_heuristic": heuristic}
            print(json.dumps(row), flush=True)
            out.append(row)
    return out


def _cost(timed: dict[str, Any] | None) -> float | None:
    """The cost of a valid result, else None."""
    return timed["cost"] if timed is not None and timed.get("valid") else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, required=True,
                        help="folder the reference's scheduler modules import from")
    parser.add_argument("--commit", default=None,
                        help="the reference's commit (default: the folder's COMMIT file)")
    parser.add_argument("--profiles", type=Path, default=ROOT / "profiles")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "reference_zbv.json")
    args = parser.parse_args(argv)
    started = start()
    reference = Reference(args.reference)
    rows_ = rows(reference, args.profiles)
    result = {
        "header": header_fields(command_line("benchmarks.reference_zbv", without_paths(argv)),
                                budget="deterministic (the reference's schedulers, re-timed "
                                "by our simulator)", started=started),
        "reference": {
            "repository": "sail-sg/zero-bubble-pipeline-parallelism",
            "commit": args.commit or reference.commit,
            "zbv": f"{SCHEDULER.replace('.', '/')}/zbv.py PipelineGraph.create_schedule",
            "heuristic": f"{SCHEDULER.replace('.', '/')}/zb.py initial_solution"
            if reference.zb is not None else None,
        },
        "multiples": list(MULTIPLES),
        "limit": "multiple * the profile's memory_limit (num_ranks * max(m_b) if null)",
        "cost": "our simulator's largest per-rank span of the reference's orders",
        "rows": rows_,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
