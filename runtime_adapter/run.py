"""``torchrun`` entry point: run a schedule on the built-in example MLP, one rank a process.

    torchrun --nproc-per-node 2 -m runtime_adapter.run --method zb-h1 --microbatches 8 --check
    torchrun --nproc-per-node 2 -m runtime_adapter.run --method zb-v --chunks 2 \
        --placement v --engine torch --check
    torchrun --nproc-per-node 4 -m runtime_adapter.run --schedule S.json --steps 5 \\
        --trace out/measured.json --report out/report.txt

On GPUs (``--device auto``, the default, picks CUDA and NCCL when torch sees a GPU, and
``LOCAL_RANK``'s GPU for each process; the CPU and gloo otherwise)::

    torchrun --nproc-per-node 8 -m ppsched.runtime_adapter.run --method zb-h1 --check
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
        --rdzv-endpoint HOST:29500 -m ppsched.runtime_adapter.run --schedule S.json

The schedule comes from a file (``ppsched solve ... -o S.json``) or is solved here for a
unit-time profile (``--method``). Every rank builds the example model from one seed and
keeps its stages. ``--check`` compares the first step's loss and gradients with the
unpipelined model; ``--trace``/``--report`` record the last step and write the measured
Chrome trace and the predicted-vs-measured report (meaningful when the schedule's profile
was measured in ms, e.g. by ``python -m ppsched.runtime_adapter.profile_cli``).
``--engine torch`` runs the schedule in torch.distributed.pipelining's runtime instead of
our executor (`runtime_adapter.engines`); it records no per-op times.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import sys
from collections.abc import Sequence

import torch
import torch.distributed as dist
from ppsched.runtime_adapter.comm import PipelineTimeout
from ppsched.runtime_adapter.devices import BACKENDS, DEVICES, init_distributed
from ppsched.runtime_adapter.engines import ENGINE_NAMES, make_engine
from ppsched.runtime_adapter.executor import PipelineExecutor
from ppsched.runtime_adapter.model import example_batch, mlp_stages, mse_loss
from ppsched.runtime_adapter.optim import step_optimizer
from ppsched.runtime_adapter.timeline import (
    compare,
    format_report,
    gather_records,
    measured_schedule,
)
from ppsched.solver.model import (
    ProfileError,
    Schedule,
    ScheduleInvalid,
    parse_profile,
    parse_schedule,
)
from ppsched.solver.render import render_trace
from ppsched.solver.solving import solve
from torch import nn

log = logging.getLogger("ppsched.runtime_adapter.run")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="torchrun --nproc-per-node P -m ppsched.runtime_adapter.run",
                                description="Run a pipeline schedule on the example MLP.")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--schedule", help="schedule JSON (DESIGN.md section 4)")
    source.add_argument("--method", help="solve a unit-time profile with this method")
    p.add_argument("--microbatches", type=int, default=8, help="m for --method (default 8)")
    p.add_argument("--chunks", type=int, default=1, help="v for --method (default 1)")
    p.add_argument("--placement", choices=("loop", "v"), help="placement for --chunks > 1")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers-per-stage", type=int, default=2)
    p.add_argument("--microbatch-size", type=int, default=8)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--post-validation", action="store_true",
                   help="optimizer step without a barrier, rolled back if the check fails")
    p.add_argument("--max-grad-norm", type=float, default=None)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds any wait may take")
    p.add_argument("--threads", type=int, default=1, help="CPU threads per rank")
    p.add_argument("--device", choices=DEVICES, default="auto",
                   help="auto (default): cuda:LOCAL_RANK when torch sees a GPU, else cpu")
    p.add_argument("--backend", choices=BACKENDS, default="auto",
                   help="auto (default): nccl on CUDA, gloo on the CPU")
    p.add_argument("--engine", choices=ENGINE_NAMES, default="ppsched",
                   help="ppsched: our executor (default); torch: torch's pipelining runtime")
    p.add_argument("--check", action="store_true",
                   help="compare step 1 with the unpipelined model")
    p.add_argument("--trace", help="write the last step's measured Chrome trace here")
    p.add_argument("--report", help="write the predicted-vs-measured report here")
    return p


def _schedule(args: argparse.Namespace, world: int) -> Schedule:
    if args.schedule:
        with open(args.schedule) as f:
            return parse_schedule(json.load(f))
    data = {"num_ranks": world, "num_microbatches": args.microbatches,
            "num_chunks": args.chunks, "t_f": 1.0, "t_b": 1.0, "t_w": 1.0, "m_b": 1.0,
            "m_w": 0.5}
    if args.placement:
        data["placement"] = args.placement
    return solve(parse_profile(data), args.method)


def _check(mine: dict[int, nn.Module], stages: list[nn.Sequential], loss: float | None,
           inputs: list[torch.Tensor], targets: list[torch.Tensor],
           device: torch.device) -> float:
    """The largest relative error of this rank's gradients (and loss) vs. the reference."""
    reference = nn.Sequential(*copy.deepcopy(stages)).to(device)
    m = len(inputs)
    ref_loss = sum(mse_loss(reference(x), y) for x, y in zip(inputs, targets, strict=True)) / m
    ref_loss.backward()  # type: ignore[union-attr]
    ref = ref_loss.item()  # type: ignore[union-attr]
    worst = abs(loss - ref) / abs(ref) if loss is not None else 0.0
    for s, module in mine.items():
        for p, q in zip(module.parameters(), reference[s].parameters(), strict=True):
            assert p.grad is not None and q.grad is not None
            worst = max(worst, float((p.grad - q.grad).norm() / q.grad.norm().clamp_min(1e-30)))
    return worst


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads)
    if args.engine == "torch" and (args.trace or args.report):
        print("ppsched.runtime_adapter.run: error: --trace/--report need --engine ppsched; got "
              "--engine torch, whose runtime records no per-op times", file=sys.stderr)
        return 2
    if "RANK" not in os.environ:
        print("ppsched.runtime_adapter.run: error: not launched by torchrun (RANK is not set); run "
              "`torchrun --nproc-per-node P -m ppsched.runtime_adapter.run ...`", file=sys.stderr)
        return 2
    # torch's runtime waits with the process group's timeout; ours with --timeout too.
    try:
        device = init_distributed(args.device, args.backend, timeout_s=args.timeout)
    except ValueError as exc:
        print(f"ppsched.runtime_adapter.run: error: {exc}", file=sys.stderr)
        return 2
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        schedule = _schedule(args, world)
        problem = schedule.profile.problem
        m = schedule.profile.num_microbatches
        stages = mlp_stages(problem.num_stages, hidden=args.hidden,
                            layers_per_stage=args.layers_per_stage)
        mine = {s: copy.deepcopy(stages[s]).to(device) for s in problem.rank_to_stages[rank]}
        options = {"timeout_s": args.timeout} if args.engine == "ppsched" else {}
        executor = make_engine(args.engine, schedule, mine, mse_loss, **options)
        optimizer = torch.optim.AdamW(executor.parameters(), lr=args.lr)
        inputs, targets = example_batch(m, microbatch_size=args.microbatch_size,
                                        hidden=args.hidden)
        inputs = [x.to(device) for x in inputs]
        targets = [y.to(device) for y in targets]
        recording = bool(args.trace or args.report)
        for step in range(1, args.steps + 1):
            if isinstance(executor, PipelineExecutor):
                result = executor.run(inputs, targets,
                                      record=recording and step == args.steps)
            else:
                result = executor.run(inputs, targets)
            if args.check and step == 1:
                error = torch.tensor([_check(mine, stages, result.loss, inputs, targets,
                                             device)], device=device)
                dist.all_reduce(error, op=dist.ReduceOp.MAX)
                if rank == 0:
                    log.info("step 1 vs. the unpipelined model: largest relative error of "
                             "loss and gradients over all ranks %.2e", error.item())
            outcome = step_optimizer(optimizer, executor.parameters(),
                                     post_validation=args.post_validation,
                                     max_grad_norm=args.max_grad_norm, timeout_s=args.timeout)
            if result.loss is not None:
                log.info("%s step %d: loss %.6f, grad norm %.4f%s", schedule.method, step,
                         result.loss, outcome.grad_norm,
                         " (rolled back)" if outcome.rolled_back else "")
        if recording:
            per_rank = gather_records(result.records)
            if rank == 0:
                measured = measured_schedule(schedule, per_rank)
                if args.trace:
                    with open(args.trace, "w") as f:
                        json.dump(render_trace(measured), f)
                if args.report:
                    report = format_report(compare(schedule, measured))
                    with open(args.report, "w") as f:
                        f.write(report)
                    log.info("predicted vs. measured:\n%s", report)
    except (ProfileError, ScheduleInvalid, ValueError, OSError, PipelineTimeout) as exc:
        print(f"ppsched.runtime_adapter.run: error on rank {rank}: {exc}", file=sys.stderr)
        return 2
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
