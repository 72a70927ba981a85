"""The profiler's command line: measure a built-in model (the example MLP or the small
GPT) and write its profile JSON (the measurement itself: `profiler`, `profile_ranks`).

Run it::

    python -m ppsched.runtime_adapter.profile_cli --ranks 2 --microbatches 8 -o profile.json
    torchrun --nproc-per-node 2 -m ppsched.runtime_adapter.profile_cli --ranks 2 -o p.json

Under torchrun with ``--ranks`` processes each rank builds and measures only its own
stages and rank 0 gathers them (`profile_ranks.profile_model`, also the entry for
profiling your own model); otherwise one process measures every stage.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
from ppsched.runtime_adapter.profile_models import BuiltIn, built_in, own_stages
from ppsched.runtime_adapter.profile_ranks import profile_model, stages_of_rank
from ppsched.runtime_adapter.profiler import measure_t_comm, profile_stages
from ppsched.solver.model import ProfileError

log = logging.getLogger(__name__)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ppsched.runtime_adapter.profile_cli``: profile a built-in model (see
    --help)."""
    parser = argparse.ArgumentParser(
        prog="python -m ppsched.runtime_adapter.profile_cli",
        description="Measure a built-in model's stages (the example MLP or the small GPT) "
        "and write a profile JSON. Under torchrun with --ranks processes, each rank builds "
        "and measures only its own stages and rank 0 writes the profile; t_comm is "
        "measured between ranks 0 and 1.")
    parser.add_argument("--ranks", type=int, required=True, help="pipeline ranks p")
    parser.add_argument("--microbatches", type=int, default=8, help="m (default 8)")
    parser.add_argument("--chunks", type=int, default=1, help="stages per rank v")
    parser.add_argument("--placement", choices=("loop", "v"), default=None)
    parser.add_argument("--model", choices=("mlp", "gpt"), default="mlp",
                        help="the example MLP (default) or the small GPT (tied embeddings)")
    parser.add_argument("--hidden", type=int, default=256, help="width (the GPT's dim)")
    parser.add_argument("--vocab", type=int, default=2048, help="GPT vocabulary")
    parser.add_argument("--seq", type=int, default=64, help="GPT sequence length")
    parser.add_argument("--heads", type=int, default=4, help="GPT attention heads")
    parser.add_argument("--layers-per-stage", type=int, default=2)
    parser.add_argument("--microbatch-size", type=int, default=16)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (default 1)")
    parser.add_argument("--memory-limit", type=float, default=None, help="MiB per rank")
    parser.add_argument("--policies", action="store_true", help="also measure t_r, m_ckpt, "
                        "t_offload, t_reload and m_keep (recompute and offload)")
    parser.add_argument("-o", "--output", required=True, help="profile JSON to write")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads)
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    try:
        for field in ("ranks", "microbatches", "chunks", "hidden", "layers_per_stage",
                      "microbatch_size", "iters"):
            if getattr(args, field) < 1:
                raise ProfileError(field, getattr(args, field), "an integer >= 1")
        if args.chunks > 1 and args.placement is None:
            raise ProfileError("placement", None, f"'loop' or 'v' since --chunks = "
                               f"{args.chunks} > 1")
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) \
            if torch.cuda.is_available() else torch.device("cpu")
        if distributed:
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
            if device.type == "cuda":
                torch.cuda.set_device(device)
        model = built_in(args, args.ranks * args.chunks)
        if distributed and dist.get_world_size() == args.ranks:
            profile = _profile_per_rank(args, model, device)
            if profile is None:
                return 0  # rank 0 writes the file
        else:
            profile = _profile_in_one_process(args, model, device, distributed)
            if profile is None:
                return 0
        with open(args.output, "w") as f:
            json.dump(profile, f, indent=2)
            f.write("\n")
        log.info("wrote %s: t_f %s ms, t_b %s ms, t_w %s ms, t_comm %s ms", args.output,
                 profile["t_f"], profile["t_b"], profile["t_w"], profile["t_comm"])
    except (ValueError, OSError) as exc:
        print(f"profiler: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if distributed and dist.is_initialized():
            dist.destroy_process_group()
    return 0


def _profile_per_rank(args: argparse.Namespace, model: BuiltIn, device: torch.device,
                      ) -> dict[str, Any] | None:
    """One process per pipeline rank (torchrun): each measures its own stages."""
    if args.policies:
        raise ProfileError("policies", True, "the one-process profiler (run it without "
                           "torchrun, or with a process count other than --ranks)")
    owned = stages_of_rank(args.ranks, args.chunks, args.placement)
    return profile_model(lambda r: own_stages(model, owned[r], device),
                         model.example_input.to(device), model.loss_fn,
                         model.target.to(device), num_microbatches=args.microbatches,
                         num_chunks=args.chunks, placement=args.placement,
                         memory_limit=args.memory_limit, iters=args.iters,
                         name=f"{args.model}-measured-p{args.ranks}")


def _profile_in_one_process(args: argparse.Namespace, model: BuiltIn, device: torch.device,
                            distributed: bool) -> dict[str, Any] | None:
    """Every stage in this process (rank 0 under torchrun, after measuring t_comm)."""
    t_comm = 0.0
    if distributed:
        t_comm = measure_t_comm((*model.example_input.shape, args.hidden)
                                if args.model == "gpt" else
                                (args.microbatch_size, args.hidden), device=device)
        if dist.get_rank() != 0:
            return None
    stages = [s.to(device) for s in model.stages()]
    return profile_stages(
        stages, model.example_input.to(device), model.loss_fn, model.target.to(device),
        num_ranks=args.ranks, num_microbatches=args.microbatches, num_chunks=args.chunks,
        placement=args.placement, t_comm=t_comm, memory_limit=args.memory_limit,
        iters=args.iters, policies=args.policies)


if __name__ == "__main__":
    sys.exit(main())
