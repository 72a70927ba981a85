"""Profiling on the pipeline's own ranks: each rank holds and measures only its stages.

`profile_stages` measures every stage in one process, which a model that needs pipelining
cannot fit. `profile_model` is its distributed form, a collective over the process group
(``torchrun --nproc-per-node P``, or `launch_local`): every rank builds its own stages
(``stages_for_rank(rank)``), one plain forward pass along the pipeline hands each stage a
real input (sent from the rank of the stage before), every rank times F, B and W of its
stages with the executor's B/W split and counts their memory exactly as `profile_stages`
does, and rank 0 gathers the figures into one profile JSON. ``t_comm`` is measured
between ranks 0 and 1 with the first stage's output (`measure_t_comm`).

B is given a gradient of ones for a stage that is not the last (its values do not change
the time or the bytes of dense kernels); the last stage's B starts from the loss.

Profiling your own model (a torchtitan- or Hugging Face-style module cut into stages)::

    def stages_for_rank(rank: int) -> dict[int, nn.Module]:
        # build only this rank's stages; the keys are stage indices in model order
        return {s: build_stage(s) for s in rank_to_stages[rank]}

    profile = profile_model(stages_for_rank, example_input, loss_fn, target,
                            num_microbatches=16)   # on every rank; rank 0 gets the dict
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from ppsched.runtime_adapter.op_overhead import measure_t_op
from ppsched.runtime_adapter.profiler import Timer, build_profile, measure_t_comm, saved_bytes
from ppsched.runtime_adapter.stage import LossFn, StageRunner
from ppsched.runtime_adapter.values import Value, call, flatten, unflatten
from ppsched.solver.model import ProfileError, parse_profile
from torch import nn
from torch.utils._pytree import tree_map


@dataclass(frozen=True)
class StageFigures:
    """One stage's medians (ms) and bytes, as `profile_stages` measures them."""

    t_f: float
    t_b: float
    t_w: float
    m_b: int
    m_w: int


def measure_stage(runner: StageRunner, x: Value, target: torch.Tensor | None, *,
                  warmup: int, iters: int) -> StageFigures:
    """Time F, B and W of microbatch 0 of one stage (`iters` rounds after `warmup`) and
    count what F saves and what B keeps for W."""
    flat = flatten(x, "input")[1]
    timer = Timer(flat[0].device)
    times: dict[str, list[float]] = {"F": [], "B": [], "W": []}
    m_b = m_w = 0
    for round_ in range(warmup + iters):
        t_f, (m_b, out) = timer.time_ms(lambda: saved_bytes(
            runner.module, lambda: runner.forward(0, x, target)))
        grad = None if runner.is_last else _ones_like(out)
        t_b, _ = timer.time_ms(lambda g=grad: runner.backward_input(0, g))
        m_w = runner.deferred_bytes(0)
        t_w, _ = timer.time_ms(lambda: runner.backward_weight(0))
        if round_ >= warmup:
            for kind, t in (("F", t_f), ("B", t_b), ("W", t_w)):
                times[kind].append(t)
    runner.module.zero_grad(set_to_none=True)
    return StageFigures(*(statistics.median(times[k]) for k in ("F", "B", "W")), m_b, m_w)


def _ones_like(value: Value) -> Value:
    layout, tensors = flatten(value, "output")
    return unflatten(layout, [torch.ones_like(t) for t in tensors])


def profile_model(stages_for_rank: Callable[[int], Mapping[int, nn.Module]],
                  example_input: Value, loss_fn: LossFn, target: torch.Tensor, *,
                  num_microbatches: int, num_chunks: int = 1, placement: str | None = None,
                  memory_limit: float | None = None, warmup: int = 2, iters: int = 5,
                  name: str | None = None, group: dist.ProcessGroup | None = None,
                  measure_overhead: bool = True) -> dict[str, Any] | None:
    """Profile a model whose stages live on the ranks of `group` (a collective).

    Args:
        stages_for_rank: this rank's stages, stage index -> module, on this rank's device;
            the indices must be the ones the placement gives the rank (loop: ``r + k p``,
            V: ``r`` and ``2p - 1 - r``).
        example_input: one microbatch of the first stage's input (read on the rank
            holding stage 0; the others may pass None).
        loss_fn: ``loss_fn(output, target)`` after the last stage.
        target: one microbatch's target (read on the rank holding the last stage).
        num_microbatches, num_chunks, placement, memory_limit, name: echoed into the
            profile (DESIGN.md section 2); p is the group's size.
        warmup, iters: untimed and timed rounds of each stage.
        measure_overhead: also measure the executor's per-op overhead ``t_op`` on the
            ranks (`runtime_adapter.op_overhead`), which the cost model adds to every op.

    Returns:
        On rank 0 the profile JSON object (validated by `parse_profile`); None elsewhere.

    Raises:
        ProfileError: ``stages_for_rank`` returned other stages than the placement gives
            this rank (field ``stages_for_rank``), or a bad count.
    """
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    shape = parse_profile(skeleton(p, num_microbatches, num_chunks, placement)).problem
    mine = dict(stages_for_rank(rank))
    expected = shape.rank_to_stages[rank]
    if sorted(mine) != sorted(expected):
        raise ProfileError("stages_for_rank", f"rank {rank}: stages {sorted(mine)}",
                           f"the stages {list(expected)} (p = {p}, v = {num_chunks}"
                           + (f", placement {placement})" if num_chunks > 1 else ")"))
    inputs = _pipeline_inputs(mine, shape.stage_to_rank, rank, example_input, group)
    last = shape.num_stages - 1
    figures = {s: measure_stage(
        StageRunner(s, module, is_last=s == last, loss_fn=loss_fn, num_microbatches=1),
        inputs[s], target if s == last else None, warmup=warmup, iters=iters)
        for s, module in sorted(mine.items())}
    t_comm = _t_comm(inputs, rank, p, group)
    t_op = measure_t_op(group, device=_device()) if measure_overhead else None
    gathered: list[Any] = [None] * p if rank == 0 else []
    dist.gather_object(figures, gathered if rank == 0 else None, dst=_global(0, group),
                       group=group)
    if rank != 0:
        return None
    per_stage = {s: f for part in gathered for s, f in part.items()}
    ordered = [per_stage[s] for s in range(shape.num_stages)]
    device = flatten(inputs[min(mine)], "input")[1][0].device
    return build_profile(
        t_f=[f.t_f for f in ordered], t_b=[f.t_b for f in ordered],
        t_w=[f.t_w for f in ordered], m_b_bytes=[f.m_b for f in ordered],
        m_w_bytes=[f.m_w for f in ordered], num_ranks=p, num_microbatches=num_microbatches,
        num_chunks=num_chunks, placement=placement, t_comm=t_comm, memory_limit=memory_limit,
        iters=iters, device=device, name=name,
        how=f" on {p} ranks, each measuring its own stages", t_op=t_op)


def stages_of_rank(p: int, v: int, placement: str | None) -> tuple[tuple[int, ...], ...]:
    """The stages each rank holds under this placement (DESIGN.md section 2)."""
    return parse_profile(skeleton(p, 1, v, placement)).problem.rank_to_stages


def skeleton(p: int, m: int, v: int, placement: str | None) -> dict[str, Any]:
    """A unit profile of this shape: its Problem gives the stage-to-rank map."""
    data: dict[str, Any] = {"name": "shape", "num_ranks": p, "num_microbatches": m,
                            "num_chunks": v, "t_f": 1.0, "t_b": 1.0, "t_w": 1.0,
                            "m_b": 1.0, "m_w": 1.0}
    if v > 1:
        data["placement"] = placement
    return data


def _pipeline_inputs(mine: Mapping[int, nn.Module], stage_to_rank: tuple[int, ...],
                     rank: int, example_input: Value, group: dist.ProcessGroup | None,
                     ) -> dict[int, Value]:
    """Each of this rank's stages' input, from one forward pass along the pipeline (no
    graph): a stage's output is sent to the rank of the next stage when that is another."""
    inputs: dict[int, Value] = {}
    x: Value = example_input
    for s in range(len(stage_to_rank)):
        if stage_to_rank[s] != rank:
            continue
        if s > 0 and stage_to_rank[s - 1] != rank:
            x = _recv(stage_to_rank[s - 1], group)
        inputs[s] = x
        with torch.no_grad():
            out = call(mine[s], x)
        if s + 1 < len(stage_to_rank) and stage_to_rank[s + 1] != rank:
            _send(out, stage_to_rank[s + 1], group)
        x = out
    return inputs


def _send(value: Value, peer: int, group: dist.ProcessGroup | None) -> None:
    # Objects, so tuple and dict boundaries travel too; via the host, so any backend can.
    dist.send_object_list([tree_map(lambda t: t.cpu(), value)], _global(peer, group),
                          group=group)


def _recv(peer: int, group: dist.ProcessGroup | None) -> Value:
    box: list[Any] = [None]
    dist.recv_object_list(box, _global(peer, group), group=group)
    device = _device()
    return tree_map(lambda t: t.to(device), box[0])


def _device() -> torch.device:
    if torch.cuda.is_available() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _global(rank: int, group: dist.ProcessGroup | None) -> int:
    return rank if group is None else dist.get_global_rank(group, rank)


def _t_comm(inputs: Mapping[int, Value], rank: int, p: int,
            group: dist.ProcessGroup | None) -> float | list[float]:
    """The latency of each stage boundary, from its message's size: ``latency + bytes /
    bandwidth``, both measured between ranks 0 and 1 (half the round trip of a one-element
    tensor, and of a large one for the bandwidth); one number when every boundary carries
    the same bytes."""
    if p < 2:
        return 0.0
    # Every rank holds the inputs of its own stages: stage s + 1's input is s's message.
    sizes = {s: sum(t.numel() * t.element_size() for t in flatten(x, "input")[1])
             for s, x in inputs.items() if s > 0}
    gathered: list[Any] = [None] * p
    dist.all_gather_object(gathered, sizes, group=group)
    message = {s - 1: n for part in gathered for s, n in part.items()}
    boundaries = [message[s] for s in range(len(message))]
    latency = measure_t_comm((1,), torch.float32, device=_device(), group=group)
    big = max(max(boundaries), _BANDWIDTH_PROBE_BYTES)
    transfer = measure_t_comm((big // 4,), torch.float32, device=_device(), group=group)
    ms_per_byte = max(transfer - latency, 0.0) / big
    per_link = [latency + n * ms_per_byte for n in boundaries]
    return per_link[0] if len(set(boundaries)) == 1 else per_link


# Large enough that the copy, not the latency, dominates its time.
_BANDWIDTH_PROBE_BYTES = 8 * 2**20
