"""ppsched's packing and ordering against naive packing, over many length draws.

Run: ``python -m benchmarks.packing [--draws 20] [--control-draws 10] [--out DIR]`` (about
an hour with ``--jobs 2`` on 2 idle cores; the p = 4 rows take most of it, since only
there is a replica's order small enough for the heuristic's local search to run, and the
real-length rows at p = 4 cost about four times the lognormal ones).

Per draw, distribution, p in {4, 8, 16} and R in {2, 4, 8} replicas: samples are drawn
until they hold ``R * 2p * cap * 0.85`` tokens (cap 32768, so naive packing makes about
2p microbatches per replica), then
- ``naive``: arrival order, each microbatch filled to the cap, dealt to the replicas in
  turn, each replica solved with ``1f1b`` and with the ZB ``heuristic``, in arrival order;
- ``balanced``: the strong baseline, Karmarkar-Karp over the replicas then over each
  replica's microbatches (`ppsched.solver.packing.pack_samples`, the same counts as
  ppsched), each replica solved with the same ZB ``heuristic`` in the order of entry it
  chooses, as ppsched's are: what ppsched's search adds (other assignments, moves) is
  all that separates the two;
- ``ppsched``: `ppsched.solver.packing.best_packing` with as many microbatches per replica as
  naive packing's largest replica: the best by step time of three assignments
  (balanced, fill, arrival; see `solver.packing.search`), each replica solved with the
  ``heuristic`` in the order of entry it chooses, then single-sample moves from the
  slowest replica to the fastest while the step time falls; ``ppsched-1f1b``: the same
  search with ``1f1b``.
The step time is the slowest replica's simulated cost; imbalance is (max - min) / min of
the replicas' costs. Speed-up = baseline step time / ppsched step time.

Cost model (a 1.5B GPT, hidden h = 2304): a sample of s tokens costs ``a*s^2 + b*s`` with
``a/b = 1/(6h)`` (attention 4*s*h FLOPs per token per layer beside 24*h^2 for the
matrices), memory ``s``. The base profile is the Zero Bubble paper's 1.5B stage times
(t_f 18.5, t_b 18.1, t_w 9.3, t_comm 0.6 ms; m_b 1, m_w 0.45; limit p*m_b) taken as those
of one 32768-token sample, so every microbatch (at most the cap) scales down from it.

Lengths: ``lognormal`` (mu = ln 1000, sigma = 1.2, clipped to [16, 32768]: median about
1,000 tokens, mean about 2,000, a tail to 32k) like post-training data; ``uniform``
[16, 4096] as the control; ``chitchat``, real conversation lengths shipped by the PyPI
package ``chitchat-dataset`` (the ``bench`` extra; median about 60 tokens, mean about
440, longest about 29k), skipped when it is not installed. Writes
``benchmarks/results/packing.md`` with the load average before and after.
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ppsched.solver.model.profile import Profile, parse_profile
from ppsched.solver.packing import (
    CostModel,
    PackSpec,
    Quadratic,
    best_packing,
    naive_samples,
    pack_samples,
    solve_replicas,
)
from ppsched.solver.packing.partition import Bins
from ppsched.solver.packing.synthetic import (
    LOGNORMAL_MU,
    LOGNORMAL_SIGMA,
    MAX_TOKENS,
    MIN_TOKENS,
    lognormal,
    uniform,
)

from benchmarks.result_header import result_header, start

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("packing.md",)
MEASURES = ("solver/packing", "solver/model", "benchmarks/packing.py")
CAP = 32768
HIDDEN = 2304
COST = CostModel(forward=Quadratic(1.0 / (6 * HIDDEN), 1.0), memory_per_token=1.0)
FILL = 0.85
CHARS_PER_TOKEN = 4  # the usual estimate for English text


@functools.cache
def chitchat_lengths() -> tuple[int, ...]:
    """Real conversation lengths: the Chit Chat Challenge dataset that the PyPI package
    ``chitchat-dataset`` ships (7,168 conversations, MIT), each conversation's text in
    tokens estimated as characters / 4, clipped to [16, 32768]. Empty without the
    package (the ``bench`` extra)."""
    try:
        from chitchat_dataset import Dataset
    except ImportError:
        return ()
    lengths = []
    for conversation in Dataset().values():
        chars = sum(len(u["text"]) + 1 for m in conversation["messages"] for u in m)
        lengths.append(min(MAX_TOKENS, max(MIN_TOKENS, round(chars / CHARS_PER_TOKEN))))
    return tuple(lengths)


def chitchat(count: int, seed: int) -> list[int]:
    """`count` conversations drawn with replacement from `chitchat_lengths`."""
    return random.Random(seed).choices(chitchat_lengths(), k=count)


DISTRIBUTIONS: dict[str, Callable[[int, int], list[int]]] = {
    "lognormal": lambda count, seed: lognormal(count, seed),
    "uniform": lambda count, seed: uniform(count, seed),
    "chitchat": chitchat,
}


def base_profile(p: int) -> Profile:
    return parse_profile({"name": f"gpt1.5b-p{p}", "num_ranks": p, "num_microbatches": 1,
                          "t_f": 18.5, "t_b": 18.1, "t_w": 9.3, "t_comm": 0.6, "m_b": 1.0,
                          "m_w": 0.45, "memory_limit": float(p)})


def draw(distribution: str, seed: int, tokens: int) -> list[int]:
    """Samples in arrival order until they hold `tokens` tokens."""
    lengths: list[int] = []
    chunk = 0
    while sum(lengths) < tokens:
        lengths += DISTRIBUTIONS[distribution](256, seed * 1000 + chunk)
        chunk += 1
    total, out = 0, []
    for s in lengths:
        if total >= tokens:
            break
        out.append(s)
        total += s
    return out


def work_imbalance(lengths: Sequence[int], groups: list[Bins]) -> float:
    """(max - min) / min over replicas of their summed microbatch costs (cost model: F's
    time a*s^2 + b*s per sample), before any schedule."""
    work = [COST.time([lengths[i] for mb in group for i in mb]) for group in groups]
    return (max(work) - min(work)) / min(work)


STRATEGIES = ("balanced", "fill", "arrival")


def run_case(distribution: str, seed: int, p: int, replicas: int) -> dict[str, float]:
    base = base_profile(p)
    lengths = draw(distribution, seed, int(replicas * 2 * p * CAP * FILL))
    naive = naive_samples(lengths, CAP, replicas)
    count = max(len(g) for g in naive)
    balanced = pack_samples(lengths, COST, CAP, [count] * replicas)
    out: dict[str, float] = {"samples": len(lengths),
                             "work-naive": work_imbalance(lengths, naive),
                             "work-balanced": work_imbalance(lengths, balanced)}
    for method, suffix in (("1f1b", "-1f1b"), ("heuristic", "")):
        spec = PackSpec(lengths=tuple(lengths), cap=CAP, num_replicas=replicas, cost=COST,
                        method=method)
        ours = best_packing(base, spec)
        theirs = solve_replicas("naive", base, naive, spec, method, choose_order=False)
        out[f"ppsched{suffix}"], out[f"ppsched{suffix}-imbalance"] = \
            ours.step_time, ours.imbalance
        if not suffix:  # the strong baseline: the balanced assignment, same schedule
            out["balanced-zb"] = solve_replicas("balanced", base, balanced, spec, method,
                                                choose_order=True).step_time
        out[f"naive{suffix or '-zb'}"] = theirs.step_time
        out[f"naive{suffix or '-zb'}-imbalance"] = theirs.imbalance
        if not suffix:
            out["strategy"] = STRATEGIES.index(ours.strategy)
            out["moves"] = ours.moves
            out["work-ppsched"] = work_imbalance(lengths, ours.groups())
    return out


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} / {min(values):.3f}"


def _pct(values: list[float], digits: int = 1) -> str:
    return f"{100 * statistics.median(values):.{digits}f}% / {100 * max(values):.{digits}f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--control-draws", type=int, default=None,
                        help="draws of the uniform control and the real distribution "
                        "(default: --draws)")
    parser.add_argument("--ranks", default="4,8,16")
    parser.add_argument("--replicas", default="2,4,8")
    parser.add_argument("--jobs", type=int, default=1,
                        help="worker processes for the cases (each case is one process's)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    pool = ProcessPoolExecutor(args.jobs) if args.jobs > 1 else None
    started = start()
    began = time.perf_counter()
    ranks = [int(x) for x in args.ranks.split(",")]
    replica_counts = [int(x) for x in args.replicas.split(",")]
    rows = ["| lengths | p | R | samples (median) | vs naive 1F1B: median / worst "
            "| vs naive ZB: median / worst | vs balanced ZB: median / worst "
            "| packing alone (1F1B): median / worst "
            "| imbalance naive ZB: median / max | imbalance ppsched: median / max "
            "| work imbalance naive / ppsched (median) | kept: balanced / fill / arrival "
            "| moves: median / max |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
            "| ---: | ---: |"]
    everything: dict[str, list[float]] = {"1f1b": [], "zb": [], "balanced": [],
                                          "imbalance-naive": [], "imbalance-ppsched": []}
    vs_balanced_all: dict[str, list[float]] = {}
    for distribution in DISTRIBUTIONS:
        if distribution == "chitchat" and not chitchat_lengths():
            print("chitchat-dataset is not installed (pip install 'ppsched[bench]'): "
                  "skipping the real distribution", flush=True)
            continue
        draws = args.draws if distribution == "lognormal" else \
            (args.control_draws or args.draws)
        for p in ranks:
            for replicas in replica_counts:
                jobs = [(distribution, seed, p, replicas) for seed in range(draws)]
                cases = list(pool.map(run_case, *zip(*jobs, strict=True)) if pool else
                             (run_case(*job) for job in jobs))
                vs_1f1b = [c["naive-1f1b"] / c["ppsched"] for c in cases]
                vs_zb = [c["naive-zb"] / c["ppsched"] for c in cases]
                vs_balanced = [c["balanced-zb"] / c["ppsched"] for c in cases]
                vs_balanced_all.setdefault(distribution, []).extend(vs_balanced)
                alone = [c["naive-1f1b"] / c["ppsched-1f1b"] for c in cases]
                naive_imb = [c["naive-zb-imbalance"] for c in cases]
                ours_imb = [c["ppsched-imbalance"] for c in cases]
                if distribution == "lognormal":
                    everything["1f1b"] += vs_1f1b
                    everything["zb"] += vs_zb
                    everything["balanced"] += vs_balanced
                    everything["imbalance-naive"] += naive_imb
                    everything["imbalance-ppsched"] += ours_imb
                kept = " / ".join(str(sum(1 for c in cases if c["strategy"] == k))
                                  for k in range(len(STRATEGIES)))
                moves = [c["moves"] for c in cases]
                rows.append(
                    f"| {distribution} | {p} | {replicas} | "
                    f"{statistics.median(c['samples'] for c in cases):.0f} | "
                    f"{_fmt(vs_1f1b)} | {_fmt(vs_zb)} | {_fmt(vs_balanced)} | "
                    f"{_fmt(alone)} | "
                    f"{_pct(naive_imb)} | {_pct(ours_imb, 2)} | "
                    f"{100 * statistics.median(c['work-naive'] for c in cases):.1f}% / "
                    f"{100 * statistics.median(c['work-ppsched'] for c in cases):.1f}% | "
                    f"{kept} | {statistics.median(moves):.0f} / {max(moves):.0f} |")
                print(rows[-1], flush=True)
    if pool is not None:
        pool.shutdown()
    wall = time.perf_counter() - began
    command = (f"python -m benchmarks.packing --draws {args.draws}"
               + (f" --control-draws {args.control_draws}" if args.control_draws else "")
               + f" --ranks {args.ranks} --replicas {args.replicas} --jobs {args.jobs}")
    text = "\n".join([
        *result_header(command, started=started, budget="deterministic (seeded draws, "
                       "simulated step times; no time limit)"),
        f"{wall:.0f} s of wall time.",
        "",
        f"Lengths: lognormal mu = ln 1000 ({LOGNORMAL_MU:.3f}), sigma = {LOGNORMAL_SIGMA}, "
        f"clipped to [{MIN_TOKENS}, {MAX_TOKENS}]; uniform [{MIN_TOKENS}, 4096] (control); "
        f"chitchat: the {len(chitchat_lengths())} real conversations of the PyPI package "
        "chitchat-dataset 0.9.0 (MIT), tokens estimated as characters / 4, clipped alike, "
        "drawn with replacement. "
        f"Cap {CAP} tokens per microbatch; samples fill {FILL:.0%} of R * 2p microbatches. "
        f"Cost a*s^2 + b*s per sample with a/b = 1/(6*{HIDDEN}); base times: the Zero "
        "Bubble paper's 1.5B stage (18.5 / 18.1 / 9.3 / 0.6 ms) for one 32k-token sample. "
        "Speed-up = baseline step time / ppsched step time (simulated; > 1: ppsched "
        "faster). Two baselines: naive (below) and balanced: Karmarkar-Karp over the "
        "replicas then each replica's microbatches, the same counts as ppsched, every "
        "replica solved with the same ZB heuristic in the order of entry it chooses (as "
        "ppsched's replicas are), with no other assignment tried and no moves. "
        "ppsched = `ppsched.solver.packing.best_packing`: the best of three assignments by step "
        "time (balanced: Karmarkar-Karp over replicas then microbatches; fill: the same "
        "replicas, first-fit decreasing into the microbatches; arrival: naive packing's "
        "own), every replica solved with the ZB heuristic in the order of entry it "
        "chooses, then up to 2R single-sample moves from the slowest replica to the "
        "fastest, each kept only when the step time falls. Naive = arrival order filled "
        "to the cap, dealt to the replicas in turn, run in arrival order; ppsched uses as "
        "many microbatches per replica as naive packing's largest replica. Packing alone "
        "= naive 1F1B over ppsched's search run with 1F1B. Imbalance: (max - min) / min of "
        "the replicas' simulated costs.",
        "",
        "Work imbalance: (max - min) / min of the replicas' summed cost-model times, "
        "before any schedule.",
        "",
        *rows,
        "",
        f"Over all lognormal cases ({len(everything['zb'])}): speed-up vs naive 1F1B "
        f"median {statistics.median(everything['1f1b']):.3f}, worst "
        f"{min(everything['1f1b']):.3f}; vs naive ZB median "
        f"{statistics.median(everything['zb']):.3f}, worst {min(everything['zb']):.3f}; "
        f"vs balanced ZB median {statistics.median(everything['balanced']):.3f}, worst "
        f"{min(everything['balanced']):.3f}, best {max(everything['balanced']):.3f}; "
        f"imbalance naive ZB median {100 * statistics.median(everything['imbalance-naive']):.1f}%, "
        f"max {100 * max(everything['imbalance-naive']):.1f}%; ppsched median "
        f"{100 * statistics.median(everything['imbalance-ppsched']):.2f}%, max "
        f"{100 * max(everything['imbalance-ppsched']):.2f}%.",
        "",
        "Against the balanced baseline (every case of each distribution): " + "; ".join(
            f"{name} ({len(v)} cases) median {statistics.median(v):.3f}, worst "
            f"{min(v):.3f}, best {max(v):.3f}" for name, v in vs_balanced_all.items()) + ".",
        ""])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "packing.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
