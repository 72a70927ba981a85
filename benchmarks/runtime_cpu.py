"""Measured step time of 1F1B, ZB-H1 and the solver's schedule on CPU, against prediction.

    .venv/bin/python -m benchmarks.runtime_cpu [--hidden 512] [--microbatches 8]

2 ranks (processes), one thread each, gloo. The example MLP is sized so that compute
dominates communication. Steps:

1. Profile its two stages with `profile_stages` on both ranks at once (one thread each,
   as they will run) and measure ``t_comm`` between them.
2. Solve the profile with ``1f1b``, ``zb-h1`` and ``heuristic``; the simulator predicts
   each schedule's cost (largest per-rank span).
3. Run the three schedules side by side on two ranks (round robin, step by step, so drift
   hits all alike) and take the median step time (the slower rank's ``executor.run``) and
   the recorded span of the last step.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch
from ppsched.runtime_adapter.launch import launch_local
from ppsched.runtime_adapter.model import example_batch, mlp_stages, mse_loss
from ppsched.runtime_adapter.profiler import measure_t_comm, profile_stages
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.model.schedule import Schedule
from ppsched.solver.solving.entry import solve

from benchmarks.result_header import command_line, result_header, start

# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("runtime_cpu.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "runtime_adapter", "benchmarks/step_timing.py",
    "benchmarks/runtime_cpu.py",
)
METHODS = ("1f1b", "zb-h1", "heuristic")
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _profile(rank: int, world: int, hidden: int, layers: int, microbatch_size: int,
             microbatches: int) -> dict[str, Any]:
    """Both ranks profile at once (each on its own core, as when they run the pipeline);
    rank 0's figures are kept. Then t_comm between them."""
    stages = mlp_stages(world, hidden=hidden, layers_per_stage=layers)
    inputs, targets = example_batch(1, microbatch_size=microbatch_size, hidden=hidden)
    t_comm = measure_t_comm((microbatch_size, hidden), iters=30)
    return profile_stages(stages, inputs[0], mse_loss, targets[0], num_ranks=world,
                          num_microbatches=microbatches, t_comm=t_comm, iters=7,
                          name="mlp-cpu")


def _run(rank: int, world: int, schedules: list[dict[str, Any]], hidden: int,
         layers: int, microbatch_size: int, steps: int, warmup: int) -> dict[str, Any]:
    from ppsched.runtime_adapter.executor import PipelineExecutor
    from ppsched.solver.model.schedule import parse_schedule

    from benchmarks.step_timing import time_steps

    parsed = [parse_schedule(s) for s in schedules]
    m = parsed[0].profile.num_microbatches
    inputs, targets = example_batch(m, microbatch_size=microbatch_size, hidden=hidden)
    executors = []
    for schedule in parsed:
        stages = mlp_stages(schedule.profile.problem.num_stages, hidden=hidden,
                            layers_per_stage=layers)
        mine = {s: stages[s] for s in schedule.profile.problem.rank_to_stages[rank]}
        executors.append(PipelineExecutor(schedule, mine, mse_loss, timeout_s=120))
    step_ms, records = time_steps(dict(enumerate(executors)), inputs, targets,
                                  warmup=warmup, steps=steps)
    return {"step_ms": [step_ms[i] for i in range(len(executors))],
            "records": [records[i] for i in range(len(executors))]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers-per-stage", type=int, default=2)
    parser.add_argument("--microbatch-size", type=int, default=32)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    started = start()
    torch.set_num_threads(1)
    from ppsched.runtime_adapter.timeline import compare, measured_schedule

    # 1. Profile.
    p = 2
    profile = launch_local(_profile, p, args.hidden, args.layers_per_stage,
                           args.microbatch_size, args.microbatches, timeout_s=300)[0]
    lines = [f"profile (ms, MiB): t_f {profile['t_f']}  t_b {profile['t_b']}  "
             f"t_w {profile['t_w']}  t_comm {profile['t_comm']}  m_b {profile['m_b']}  "
             f"m_w {profile['m_w']}"]
    print(lines[0], flush=True)

    # 2. Solve and predict.
    parsed = parse_profile(profile)
    schedules: list[Schedule] = [solve(parsed, method) for method in METHODS]

    # 3. Run side by side.
    out = launch_local(_run, p, [s.model_dump(mode="json") for s in schedules], args.hidden,
                       args.layers_per_stage, args.microbatch_size, args.steps, args.warmup,
                       timeout_s=600)[0]
    lines += ["", f"hidden {args.hidden}, {args.layers_per_stage} blocks per stage, "
              f"microbatch {args.microbatch_size}, m = {args.microbatches}, 2 ranks x 1 "
              f"thread, median of {args.steps} steps", "",
              "| schedule | predicted cost (ms) | measured step (ms) | error | recorded span "
              "(ms) | measured bubble | vs 1F1B |", "| --- | --- | --- | --- | --- | --- | --- |"]
    base = out["step_ms"][0]
    for schedule, step_ms, records in zip(schedules, out["step_ms"], out["records"],
                                          strict=True):
        measured = measured_schedule(schedule, records)
        comparison = compare(schedule, measured)
        predicted = schedule.metrics.cost if schedule.metrics else float("nan")
        bubble = measured.metrics.bubble_rate if measured.metrics else float("nan")
        lines.append(f"| {schedule.method} | {predicted:.1f} | {step_ms:.1f} | "
                     f"{(step_ms - predicted) / step_ms:+.1%} | "
                     f"{comparison.measured_cost:.1f} | {bubble:.3f} | {step_ms / base:.3f} |")
    text = "\n".join([
        *result_header(command_line("benchmarks.runtime_cpu", argv), started=started,
                       budget="wall (measured step times of 2 CPU ranks, one thread each, "
                       "gloo; single figures move by about 10% between runs on a shared "
                       "machine)"),
        "```", *lines, "```"]) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "runtime_cpu.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
