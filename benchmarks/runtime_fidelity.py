"""Fidelity: predicted against measured step time of five schedules of a small GPT on CPU.

    python -m benchmarks.runtime_fidelity [--repeats 3] [--out benchmarks/results]

For p = 2 and 4 gloo ranks (one process and one thread each), every repeat does, from
scratch:

1. Profile the small GPT of `runtime_adapter/gpt.py` (token and position embeddings,
   attention, MLP, a head tied to the embedding; 2p blocks) with `profile_model`, each
   rank measuring its own stages: cut into p stages (one per rank) and into 2p (two per
   rank, loop and V placement).
2. Solve: ``1f1b``, ``zb-h1`` and ``heuristic`` on the p-stage profile, ``zb-v`` on the
   V one and ``1f1b-interleaved`` on the loop one (no memory limit), each on the layout
   it was profiled for (the heuristic does not re-cut the profile into other layouts).
   The prediction of a step is the schedule's simulated makespan under its profile.
3. Run the five schedules side by side with the ppsched executor (round robin, step by
   step, so drift on the machine hits all alike): the measured step is the slower rank's
   ``executor.run`` from a barrier, median over the steps; one more step is recorded op
   by op.

Reported per schedule: the median over repeats of the predicted and the measured step,
the error (measured - predicted) / measured with its min and max over repeats, the ratio
of the measured op durations to the profiled ones, and the replay: the same orders
simulated with the op durations measured in the recorded step, so that error =
(op time drift) + (what the model leaves out: waiting on gloo, Python between ops).
Ranking: whether the measured order of the five follows the predicted one.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from ppsched.runtime_adapter.gpt import GPTConfig, gpt_batch, gpt_loss, gpt_model, split_stages
from ppsched.runtime_adapter.launch import launch_local, pinned_cores
from ppsched.solver.model.profile import Profile, parse_profile
from ppsched.solver.model.schedule import Schedule, parse_schedule
from ppsched.solver.sim.simulator import simulate
from ppsched.solver.solving.entry import solve

from benchmarks.result_header import Started, command_line, result_header, start

# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("runtime_fidelity.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "runtime_adapter", "benchmarks/step_timing.py",
    "benchmarks/runtime_fidelity.py",
)
RESULTS = Path(__file__).resolve().parent / "results"
# method -> (chunks per rank, placement) of the profile it is solved on.
METHODS: dict[str, tuple[int, str | None]] = {
    "1f1b": (1, None), "zb-h1": (1, None), "heuristic": (1, None), "zb-v": (2, "v"),
    "1f1b-interleaved": (2, "loop")}


@dataclass(frozen=True)
class Sizes:
    dim: int
    heads: int
    seq: int
    vocab: int
    microbatch_size: int
    microbatches: int
    steps: int
    warmup: int
    profile_warmup: int = 2

    def config(self, p: int) -> GPTConfig:
        # 2p blocks: two per stage with one chunk per rank, one with two.
        return GPTConfig(vocab=self.vocab, seq=self.seq, dim=self.dim, heads=self.heads,
                         layers=2 * p)


def _stages(sizes: Sizes, p: int, num_stages: int, mine: tuple[int, ...]
            ) -> dict[int, torch.nn.Module]:
    every = split_stages(gpt_model(sizes.config(p), seed=0), num_stages)
    return copy.deepcopy({s: every[s] for s in mine})  # one deepcopy: a V tie stays one


def _repeat(rank: int, p: int, sizes: Sizes) -> dict[str, Any] | None:
    """One repeat on p ranks: profile three cuts, solve, run the five side by side."""
    import torch.distributed as dist
    from ppsched.runtime_adapter.executor import PipelineExecutor
    from ppsched.runtime_adapter.profile_ranks import profile_model, stages_of_rank

    from benchmarks.step_timing import time_steps

    config = sizes.config(p)
    tokens, targets = gpt_batch(config, sizes.microbatches,
                                microbatch_size=sizes.microbatch_size)
    profiles: dict[tuple[int, str | None], Any] = {}
    for chunks, placement in dict.fromkeys(METHODS.values()):
        owned = stages_of_rank(p, chunks, placement)
        profiles[(chunks, placement)] = profile_model(
            lambda r, c=chunks, o=owned: _stages(sizes, p, p * c, o[r]), tokens[0],
            gpt_loss, targets[0], num_microbatches=sizes.microbatches, num_chunks=chunks,
            placement=placement, warmup=sizes.profile_warmup, iters=7,
            name=f"gpt-p{p}-v{chunks}")
    box: list[Any] = [None]
    if rank == 0:  # one solve, the same schedules everywhere
        # Each method on the layout it was profiled for: left to itself, the heuristic
        # would also try the one-chunk profile cut into V and loop layouts (DESIGN.md
        # 6.6: each stage's times split evenly), which predicts a model cut that the
        # runtime's own split (embedding and head at the ends) does not make.
        box = [{method: solve(parse_profile({**profiles[shape], "memory_limit": None}),
                              method, layouts=(shape,)).model_dump(mode="json")
                for method, shape in METHODS.items()}]
    dist.broadcast_object_list(box, 0)
    schedules = {method: parse_schedule(data) for method, data in box[0].items()}
    executors = {}
    for method, schedule in schedules.items():
        problem = schedule.profile.problem
        mine = problem.rank_to_stages[rank]
        executors[method] = PipelineExecutor(
            schedule, _stages(sizes, p, problem.num_stages, mine), gpt_loss, timeout_s=600)
    step_ms, records = time_steps(executors, tokens, targets, warmup=sizes.warmup,
                                  steps=sizes.steps)
    if rank != 0:
        return None
    return {"schedules": box[0], "step_ms": step_ms,
            "records": records, "profiles": {f"v{c}-{pl}": pr for (c, pl), pr in
                                             profiles.items()}}


@dataclass
class Row:
    """One schedule in one repeat."""

    predicted: float
    measured: float
    replay: float
    op_ratio: float
    recorded: float

    @property
    def error(self) -> float:
        return (self.measured - self.predicted) / self.measured

    @property
    def replay_error(self) -> float:
        return (self.measured - self.replay) / self.measured


def _row(schedule: Schedule, step_ms: float, records: Any) -> Row:
    from ppsched.runtime_adapter.timeline import measured_schedule

    measured = measured_schedule(schedule, records)
    predicted_ops = [op for rank in schedule.ranks for op in rank]
    measured_ops = [op for rank in measured.ranks for op in rank]
    p_sum = sum(op.end - op.start for op in predicted_ops)  # type: ignore[operator]
    m_sum = sum(op.end - op.start for op in measured_ops)  # type: ignore[operator]
    assert schedule.metrics is not None and measured.metrics is not None
    return Row(predicted=schedule.metrics.makespan, measured=step_ms,
               replay=_replay(schedule.profile, schedule, measured), op_ratio=m_sum / p_sum,
               recorded=measured.metrics.makespan)


def _replay(profile: Profile, schedule: Schedule, measured: Schedule) -> float:
    """The makespan of the same orders with each stage's F, B and W taking their measured
    median (a fused BW is split in the profile's B:W proportion)."""
    durations: dict[tuple[int, str], list[float]] = defaultdict(list)
    for rank in measured.ranks:
        for op in rank:
            durations[(op.stage, str(op.kind))].append(op.end - op.start)  # type: ignore[operator]
    problem = profile.problem
    t_f, t_b, t_w = list(problem.t_f), list(problem.t_b), list(problem.t_w)
    for s in range(problem.num_stages):
        t_f[s] = statistics.median(durations[(s, "F")])
        if durations[(s, "B")]:
            t_b[s] = statistics.median(durations[(s, "B")])
            t_w[s] = statistics.median(durations[(s, "W")])
        else:  # fused BW only (1F1B, interleaved 1F1B)
            bw = statistics.median(durations[(s, "BW")])
            share = problem.t_b[s] / (problem.t_b[s] + problem.t_w[s])
            t_b[s], t_w[s] = bw * share, bw * (1 - share)
    data = {**profile.model_dump(mode="json"), "t_f": t_f, "t_b": t_b, "t_w": t_w,
            "memory_limit": None}
    sim = simulate(parse_profile(data).problem, schedule.orders())
    assert sim.metrics is not None
    return sim.metrics.makespan


def _kendall(predicted: list[float], measured: list[float]) -> float:
    pairs = [(i, j) for i in range(len(predicted)) for j in range(i + 1, len(predicted))]
    score = sum(1 if (predicted[i] - predicted[j]) * (measured[i] - measured[j]) > 0 else -1
                for i, j in pairs)
    return score / len(pairs)


def _order(values: dict[str, float]) -> str:
    return " < ".join(sorted(values, key=values.__getitem__))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="2,4", help="comma-separated p (default 2,4)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--microbatch-size", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--steps", type=int, default=9)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--profile-warmup", type=int, default=2,
                        help="untimed rounds of each stage before the profiler's 7")
    parser.add_argument("--no-pin", dest="pin", action="store_false",
                        help="leave the ranks to the OS scheduler (default: each rank pinned "
                        "to a core of its own, modulo the cores there are)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    sizes = Sizes(dim=args.dim, heads=args.heads, seq=args.seq, vocab=args.vocab,
                  microbatch_size=args.microbatch_size, microbatches=args.microbatches,
                  steps=args.steps, warmup=args.warmup, profile_warmup=args.profile_warmup)
    ranks = [int(x) for x in args.ranks.split(",")]
    started = start()
    began = time.perf_counter()
    rows: dict[int, list[dict[str, Row]]] = defaultdict(list)
    profile_lines: dict[int, str] = {}
    compute: dict[int, list[float]] = defaultdict(list)  # profiled F+B+W of all stages
    for repeat in range(args.repeats):
        for p in ranks:
            load = os.getloadavg()[0]
            out = launch_local(_repeat, p, sizes, timeout_s=1800, pin_cores=args.pin)[0]
            schedules = {m: parse_schedule(d) for m, d in out["schedules"].items()}
            rows[p].append({m: _row(s, out["step_ms"][m], out["records"][m])
                            for m, s in schedules.items()})
            one = out["profiles"]["v1-None"]
            compute[p].append(sum(one["t_f"]) + sum(one["t_b"]) + sum(one["t_w"]))
            profile_lines[p] = (f"p={p} (repeat {repeat + 1}, load {load:.1f}), one stage per "
                                f"rank, ms: t_f "
                                f"{one['t_f']}  t_b {one['t_b']}  t_w {one['t_w']}  t_comm "
                                f"{one['t_comm']}  t_op {one.get('t_op', 0)}; MiB: m_b "
                                f"{one['m_b']}  m_w {one['m_w']}")
            print(profile_lines[p], flush=True)
    overhead = {p: _overhead(p, sizes, args.pin) for p in ranks}
    text = _report(args, sizes, ranks, rows, profile_lines, started,
                   time.perf_counter() - began, overhead, compute, argv)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "runtime_fidelity.md").write_text(text)
    return 0


# The overhead run's GPT: compute of well under a millisecond per op, so a step is mostly
# what the cost model does not count.
TINY = {"dim": 32, "heads": 2, "seq": 16, "vocab": 256}


def _overhead(p: int, sizes: Sizes, pin: bool) -> list[float]:
    """Per schedule, ms per op that the replay leaves out, on a tiny GPT: (measured step
    - replay) / the ops of the busiest rank."""
    tiny = Sizes(**{**sizes.__dict__, **TINY})
    out = launch_local(_repeat, p, tiny, timeout_s=1800, pin_cores=pin)[0]
    per_op = []
    for method, data in out["schedules"].items():
        schedule = parse_schedule(data)
        row = _row(schedule, out["step_ms"][method], out["records"][method])
        per_op.append((row.measured - row.replay) / max(map(len, schedule.ranks)))
    return per_op


def _report(args: argparse.Namespace, sizes: Sizes, ranks: list[int],
            rows: dict[int, list[dict[str, Row]]], profile_lines: dict[int, str],
            started: Started, wall_s: float, overhead: dict[int, list[float]],
            compute: dict[int, list[float]], argv: list[str] | None) -> str:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else os.cpu_count() or 1
    if args.pin:
        where = "; ".join(f"p={p}: cores {','.join(map(str, pinned_cores(p)))}" for p in ranks)
        placement = (f"each rank pinned to a core of its own ({where}; a core is shared only "
                     "where p exceeds the cores)")
    else:
        placement = f"the ranks left to the OS scheduler on the {cores} cores"
    lines = [
        *result_header(command_line("benchmarks.runtime_fidelity", argv), started=started,
                       budget="wall (measured step times; the predictions deterministic "
                       "from the profile measured in the same repeat)"),
        "# benchmarks/runtime_fidelity.py: predicted vs measured step time (CPU, gloo)", "",
        f"torch {torch.__version__}, {cores} CPU cores; load average {started.load:.2f} "
        f"when it began; {wall_s / 60:.0f} min of wall time.", "",
        f"Model: the small GPT (tied embedding and head, vocab {sizes.vocab}, dim "
        f"{sizes.dim}, {sizes.heads} heads, seq {sizes.seq}), 2p blocks; microbatch "
        f"{sizes.microbatch_size} x {sizes.seq} tokens, m = {sizes.microbatches}. One process "
        f"and one thread per rank, {placement}. Engine: ppsched's executor. Predicted: the "
        "simulated makespan "
        f"under the profile measured in the same repeat. Measured: the slower rank's step, "
        f"median of {sizes.steps} steps after {sizes.warmup}. Figures are medians over "
        f"{args.repeats} repeats (each profiles, solves and runs from scratch); the error "
        "range is its min and max over the repeats.", "",
        "Profiles of the last repeat:", "", "```", *profile_lines.values(), "```", "",
        "| p | schedule | predicted (ms) | measured (ms) | error | error min..max | "
        "op time ratio | replay (ms) | replay error |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for p in ranks:
        for method in METHODS:
            per = [r[method] for r in rows[p]]
            errors = [r.error for r in per]
            lines.append(
                f"| {p} | {method} | {_med(r.predicted for r in per):.1f} | "
                f"{_med(r.measured for r in per):.1f} | {statistics.median(errors):+.1%} | "
                f"{min(errors):+.1%}..{max(errors):+.1%} | "
                f"{_med(r.op_ratio for r in per):.2f} | {_med(r.replay for r in per):.1f} | "
                f"{_med(r.replay_error for r in per):+.1%} |")
    lines += ["", "Ranking (fastest first), per repeat: Kendall's tau between the predicted "
              "and the measured order (1 = the same order).", ""]
    for p in ranks:
        for k, repeat in enumerate(rows[p]):
            pred = {m: r.predicted for m, r in repeat.items()}
            meas = {m: r.measured for m, r in repeat.items()}
            tau = _kendall(list(pred.values()), list(meas.values()))
            lines.append(f"- p={p}, repeat {k + 1}: predicted {_order(pred)}; measured "
                         f"{_order(meas)}; tau {tau:+.2f}")
    lines += ["", *_notes(ranks, rows, overhead, compute)]
    if min(started.load, os.getloadavg()[0]) > cores:
        lines += ["", f"The load average stayed above the {cores} cores from start to end: "
                  "the ranks got a changing share of a core, so the profile (taken first) "
                  "and the steps (taken after) saw different machines, and the replay's op "
                  "durations include time a rank was descheduled. These figures measure the "
                  "machine's neighbours as much as the cost model; rerun on an idle machine "
                  "to test the model alone."]
    return "\n".join(lines) + "\n"


def _med(values: Any) -> float:
    return statistics.median(list(values))


def _notes(ranks: list[int], rows: dict[int, list[dict[str, Row]]],
           overhead: dict[int, list[float]], compute: dict[int, list[float]]) -> list[str]:
    """The closing note: where the error comes from, from the columns above."""
    lines = ["Reading the columns: *op time ratio* is the sum of the recorded op durations "
             "over the profiled ones (above 1: ops ran slower in the pipeline than when "
             "profiled); *replay* simulates the same orders with the recorded durations, "
             "so its error is what the cost model leaves out besides op times (waiting on "
             "gloo's copies, Python between ops, the step's own setup).", ""]
    for p in ranks:
        errors = [r.error for repeat in rows[p] for r in repeat.values()]
        ratios = [r.op_ratio for repeat in rows[p] for r in repeat.values()]
        replays = [r.replay_error for repeat in rows[p] for r in repeat.values()]
        over = sum(abs(e) > 0.10 for e in errors)
        lines.append(
            f"- p={p}: {over} of {len(errors)} schedule runs are off by more than 10% "
            f"(errors {min(errors):+.1%}..{max(errors):+.1%}); op time ratio "
            f"{min(ratios):.2f}..{max(ratios):.2f}, replay error "
            f"{min(replays):+.1%}..{max(replays):+.1%}; per-op overhead on the tiny GPT "
            f"(dim {TINY['dim']}, vocab {TINY['vocab']}) "
            f"{min(overhead[p]):.2f}..{max(overhead[p]):.2f} ms per op; the same stages' "
            f"profiled F + B + W summed {min(compute[p]):.0f}..{max(compute[p]):.0f} ms "
            f"over the repeats (a factor {max(compute[p]) / min(compute[p]):.2f}: the "
            "machine's load, not the code, moved it).")
    return lines


if __name__ == "__main__":
    sys.exit(main())
