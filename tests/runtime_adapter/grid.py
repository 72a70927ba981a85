"""The correctness grid's rank function: the small GPT with tied embeddings, pipelined
(and data-parallel) by an engine, against the unpipelined single-process model.

Module level, so that spawn can pickle it. Ranks are laid out ``rank = d * pp + r``
(replica `d`, pipeline rank `r`). Engines join through `ENGINES`: a function that runs one
step on this rank and returns the replica's loss (on the last stage's rank, else None) and
the parameters to step.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from ppsched.runtime_adapter.dp_wrappers import fully_shard_stages
from ppsched.runtime_adapter.engines import make_engine
from ppsched.runtime_adapter.executor import PipelineExecutor
from ppsched.runtime_adapter.gpt import (
    GPTConfig,
    gpt_batch,
    gpt_loss,
    gpt_model,
    split_stages,
    tied_parameters,
)
from ppsched.runtime_adapter.torch_engine import TorchPipelineEngine
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.model.schedule import Schedule
from ppsched.solver.solving.entry import solve
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel

M = 4  # microbatches per replica
LR = 1e-2


@dataclass
class StepInput:
    """What an engine gets for one step on this rank."""

    schedule: Schedule
    stages: dict[int, nn.Module]
    pp_group: dist.ProcessGroup
    dp_group: dist.ProcessGroup | None
    tied: list[tuple[nn.Parameter, dist.ProcessGroup]]
    autocast_dtype: torch.dtype | None
    inputs: list[torch.Tensor]
    targets: list[torch.Tensor]


def ppsched_step(step: StepInput) -> tuple[float | None, list[nn.Parameter]]:
    executor = PipelineExecutor(step.schedule, step.stages, gpt_loss, group=step.pp_group,
                                dp_group=step.dp_group, tied=step.tied,
                                autocast_dtype=step.autocast_dtype, timeout_s=60)
    result = executor.run(step.inputs, step.targets)
    held = sum(a + b for r in executor.runners.values() for a, b in [r.held()])
    assert held == 0, f"the runners still hold {held} microbatches"
    return result.loss, executor.parameters()


def torch_step(step: StepInput) -> tuple[float | None, list[nn.Parameter]]:
    engine = TorchPipelineEngine(step.schedule, step.stages, gpt_loss, group=step.pp_group,
                                 dp_group=step.dp_group, tied=step.tied,
                                 autocast_dtype=step.autocast_dtype)
    result = engine.run(step.inputs, step.targets)
    return result.loss, engine.parameters()


ENGINES: dict[str, Callable[[StepInput], tuple[float | None, list[nn.Parameter]]]] = {
    "ppsched": ppsched_step, "torch": torch_step}


def schedule_for(method: str, pp: int) -> Schedule:
    chunks, placement = {"zb-v": (2, "v"), "1f1b-interleaved": (2, "loop")}.get(
        method, (1, None))
    data: dict[str, Any] = {"num_ranks": pp, "num_microbatches": M, "num_chunks": chunks,
                            "t_f": 1.0, "t_b": 1.0, "t_w": 1.0, "m_b": 1.0, "m_w": 0.5}
    if placement is not None:
        data["placement"] = placement
    return solve(parse_profile(data), method)


def case_key(method: str, dtype_name: str | None, wrapper: str | None = None) -> str:
    """A grid case's name in the results: method, dtype and data-parallel wrapper."""
    return f"{method}-{dtype_name or 'fp32'}" + (f"-{wrapper}" if wrapper else "")


def wrapped(stages: dict[int, nn.Module], wrapper: str,
            dp_group: dist.ProcessGroup) -> dict[int, nn.Module]:
    """This rank's stages in a data-parallel wrapper over `dp_group`, as torchtitan
    composes them: ``"ddp"`` (DistributedDataParallel) or ``"fsdp"`` (FSDP2's
    ``fully_shard`` per stage, in place, on a 1-D mesh of the group)."""
    if wrapper == "ddp":
        return {s: DistributedDataParallel(m, process_group=dp_group)
                for s, m in stages.items()}
    if wrapper == "fsdp":
        return fully_shard_stages(stages, DeviceMesh.from_group(dp_group, "cpu"))
    raise ValueError(f"invalid 'wrapper': got {wrapper!r}; expected 'ddp' or 'fsdp'")


def _full(t: torch.Tensor) -> torch.Tensor:
    # An FSDP2 parameter or gradient is a shard: compare the whole tensor (a collective
    # over the data-parallel group, called in one order on every replica).
    return t.full_tensor() if isinstance(t, DTensor) else t


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = _full(a), _full(b)
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


def _named(stages: Mapping[int, nn.Module]) -> dict[str, nn.Parameter]:
    return {f"{s}.{name}": p for s, module in stages.items()
            for name, p in module.named_parameters(remove_duplicate=False)}


def grid(rank: int, world: int, dp: int, engine: str,
         cases: list[tuple[str, str | None]]) -> dict[str, dict[str, float]]:
    """Per case (method, autocast dtype name[, data-parallel wrapper]): the largest
    relative error on this rank of the loss, of any gradient after the reductions, and of
    any parameter after AdamW. With a wrapper (`wrapped`) the engine gets the wrapped
    stages and no ``dp_group``: the wrapper alone reduces."""
    pp = world // dp
    d, r = divmod(rank, pp)
    # Every rank creates every group, in one order (new_group is collective).
    pp_groups = [dist.new_group([e * pp + q for q in range(pp)]) for e in range(dp)]
    dp_groups = [dist.new_group([e * pp + q for e in range(dp)]) for q in range(pp)]
    tie_groups = [dist.new_group([e * pp, e * pp + pp - 1]) for e in range(dp)]
    out: dict[str, dict[str, float]] = {}
    for method, dtype_name, *wrapper_or_none in cases:
        wrapper = wrapper_or_none[0] if wrapper_or_none else None
        dtype = getattr(torch, dtype_name) if dtype_name else None
        schedule = schedule_for(method, pp)
        problem = schedule.profile.problem
        n = problem.num_stages
        config = GPTConfig(layers=n)
        model = gpt_model(config, seed=7)
        tokens, targets = gpt_batch(config, M * dp, seed=3)
        # The reference: one process, every replica's microbatches, the same autocast.
        # One autocast region and backward per microbatch, as in the pipeline: one region
        # for all would share autocast's cached bf16 weights, whose gradient then sums the
        # microbatches in bf16 (4e-3 off an fp32 sum on this model).
        reference = copy.deepcopy(model)
        losses = []
        for x, y in zip(tokens, targets, strict=True):
            with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
                loss_j = gpt_loss(reference(x), y)
            (loss_j / (M * dp)).backward()
            losses.append(loss_j.detach())
        ref_loss = float(torch.stack(losses[d * M:(d + 1) * M]).double().mean())
        ref_stages = dict(enumerate(split_stages(reference, n)))
        ref_grads = {k: p.grad.clone() for k, p in _named(ref_stages).items()}
        torch.optim.AdamW(reference.parameters(), lr=LR).step()
        ref_params = _named(ref_stages)

        stages = split_stages(model, n)
        mine = copy.deepcopy({s: stages[s] for s in problem.rank_to_stages[r]})
        first, last = problem.stage_to_rank[0], problem.stage_to_rank[n - 1]
        dp_group = dp_groups[r] if dp > 1 else None
        if wrapper is not None:
            assert dp_group is not None, "a data-parallel wrapper needs replicas"
            engine_stages = wrapped(mine, wrapper, dp_group)
            dp_group = None  # the wrapper reduces
        else:
            engine_stages = mine
        # After wrapping: fully_shard replaces the parameters by sharded ones.
        tied = [(p, tie_groups[d]) for p in tied_parameters(mine)] if first != last else []
        assert first != last or pp - 1 == 0 or {first, last} == {0}
        if first != last:
            assert (first, last) == (0, pp - 1), "the tie groups assume these ranks"
        step = StepInput(schedule, engine_stages, pp_groups[d], dp_group, tied, dtype,
                         tokens[d * M:(d + 1) * M], targets[d * M:(d + 1) * M])
        loss, params = ENGINES[engine](step)
        named = _named(mine)
        grad_err = max(_rel(p.grad, ref_grads[k]) for k, p in named.items())
        torch.optim.AdamW(params, lr=LR).step()
        param_err = max(_rel(p.detach(), ref_params[k].detach()) for k, p in named.items())
        out[case_key(method, dtype_name, wrapper)] = {
            "loss": abs(loss - ref_loss) / abs(ref_loss) if loss is not None else 0.0,
            "grad": grad_err, "param": param_err, "has_loss": float(loss is not None),
            "num_params": float(sum(p.numel() for p in params)),
            "distinct": float(len({id(p) for p in params}) == len(params))}
    return out


def accumulation(rank: int, world: int, dp: int, engine: str, method: str = "zb-h1",
                 wrapper: str | None = None) -> dict[str, float]:
    """Two `run()` calls accumulated (the first with ``sync=False``), 2x2, against the
    reference that sums both calls' losses (each the mean of its microbatches). With a
    data-parallel `wrapper` the engine gets no ``dp_group``: the wrapper reduces in every
    call (which only the ties' sum must not)."""
    pp = world // dp
    d, r = divmod(rank, pp)
    pp_groups = [dist.new_group([e * pp + q for q in range(pp)]) for e in range(dp)]
    dp_groups = [dist.new_group([e * pp + q for e in range(dp)]) for q in range(pp)]
    tie_groups = [dist.new_group([e * pp, e * pp + pp - 1]) for e in range(dp)]
    schedule = schedule_for(method, pp)
    n = schedule.profile.problem.num_stages
    config = GPTConfig(layers=n)
    model = gpt_model(config, seed=7)
    calls = 2
    tokens, targets = gpt_batch(config, calls * M * dp, seed=3)
    reference = copy.deepcopy(model)
    for x, y in zip(tokens, targets, strict=True):
        (gpt_loss(reference(x), y) / (M * dp)).backward()
    ref_grads = {k: p.grad for k, p in _named(dict(enumerate(split_stages(reference, n))))
                 .items()}
    mine = copy.deepcopy({s: split_stages(model, n)[s]
                          for s in schedule.profile.problem.rank_to_stages[r]})
    options: dict[str, Any] = {"timeout_s": 60} if engine == "ppsched" else {}
    engine_stages = wrapped(mine, wrapper, dp_groups[r]) if wrapper else mine
    executor = make_engine(engine, schedule, engine_stages, gpt_loss, group=pp_groups[d],
                           dp_group=None if wrapper else dp_groups[r],
                           tied=[(p, tie_groups[d]) for p in tied_parameters(mine)],
                           **options)
    local_after_first = 0.0
    for call in range(calls):
        # Call c, replica d: microbatches (c * dp + d) * M ... + M.
        first = (call * dp + d) * M
        executor.run(tokens[first:first + M], targets[first:first + M],
                     accumulate=call > 0, sync=call == calls - 1)
        if call == 0:  # not reduced yet: this replica's own gradient, unlike the total
            local_after_first = max(_rel(p.grad, ref_grads[k])
                                    for k, p in _named(mine).items())
    return {"grad": max(_rel(p.grad, ref_grads[k]) for k, p in _named(mine).items()),
            "local_after_first": local_after_first}
