"""What the interop tests run inside torch: its own schedules' CSVs, and our CSV executed by
torch's `_PipelineScheduleRuntime` (module level, so spawn can pickle the rank function)."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import (
    PipelineScheduleMulti,
    Schedule1F1B,
    ScheduleGPipe,
    ScheduleInterleaved1F1B,
    ScheduleZBVZeroBubble,
    _PipelineScheduleRuntime,
)

HIDDEN = 8
BATCH = 2  # rows per microbatch


def _stage_stub(index: int, num_stages: int, p: int) -> Any:
    """What torch's schedule constructors read of a stage to compute their order: no
    process group and no model are needed to dump the CSV."""
    return types.SimpleNamespace(stage_index=index, num_stages=num_stages, group_size=p,
                                 group_rank=0, submod=nn.Linear(1, 1), is_first=index == 0,
                                 is_last=index == num_stages - 1,
                                 stage_index_to_group_rank=None)


def dump_torch_csv(name: str, p: int, m: int, path: Path) -> None:
    """Write the compute-only CSV of torch's own schedule `name` with its `_dump_csv`."""
    if name in ("1F1B", "GPipe"):
        cls = Schedule1F1B if name == "1F1B" else ScheduleGPipe
        single = cls(_stage_stub(0, p, p), m)
        # Single-stage schedules keep the same `pipeline_order` but define no _dump_csv:
        # the multi-stage one only reads that attribute.
        PipelineScheduleMulti._dump_csv(single, str(path))  # type: ignore[arg-type]
        return
    num_stages = 2 * p
    if name == "ZBVZeroBubble":
        stages = [_stage_stub(0, num_stages, p), _stage_stub(num_stages - 1, num_stages, p)]
        multi: Any = ScheduleZBVZeroBubble(stages, m)
    elif name == "Interleaved1F1B":
        stages = [_stage_stub(0, num_stages, p), _stage_stub(p, num_stages, p)]
        multi = ScheduleInterleaved1F1B(stages, m)
    else:
        raise ValueError(name)
    multi._dump_csv(str(path), format="compute_only")


def _model(num_stages: int) -> list[nn.Module]:
    """The whole model, one block per stage, identical on every process (fixed seed)."""
    torch.manual_seed(0)
    return [nn.Sequential(nn.Linear(HIDDEN, HIDDEN), nn.Tanh()).double()
            for _ in range(num_stages)]


def _data(m: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(m * BATCH, HIDDEN, generator=gen, dtype=torch.float64)
    y = torch.randn(m * BATCH, HIDDEN, generator=gen, dtype=torch.float64)
    return x, y


def _loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return ((output - target) ** 2).mean()


def run_csv(rank: int, world: int, csv_path: str, num_stages: int, m: int,
            stage_to_rank: list[int]) -> dict[str, Any]:
    """Run one step of our CSV under torch's `_PipelineScheduleRuntime` on this rank.

    Returns, per stage this rank holds, the largest relative difference of each gradient
    from the unpipelined model's (float64), and the loss when this rank has the last stage.
    """
    blocks = _model(num_stages)
    x, y = _data(m)
    # The reference: the whole model, every microbatch, mean of the microbatch losses
    # (torch's schedules scale gradients by 1/m by default).
    reference = _model(num_stages)
    h = x
    for block in reference:
        h = block(h)
    ref_loss = sum(_loss(h[j * BATCH:(j + 1) * BATCH], y[j * BATCH:(j + 1) * BATCH])
                   for j in range(m)) / m
    ref_loss.backward()

    mine = [s for s in range(num_stages) if stage_to_rank[s] == rank]
    stages = [PipelineStage(blocks[s], s, num_stages, torch.device("cpu")) for s in mine]
    schedule = _PipelineScheduleRuntime(stages, n_microbatches=m, loss_fn=_loss)
    schedule._load_csv(csv_path)  # compute-only: torch lowers it, adding the comms
    losses: list[torch.Tensor] = []
    first, last = 0 in mine, num_stages - 1 in mine
    args = (x,) if first else ()
    schedule.step(*args, target=y if last else None, losses=losses)

    errors: dict[str, float] = {}
    for s in mine:
        for (name, got), want in zip(blocks[s].named_parameters(),
                                     reference[s].parameters(), strict=True):
            assert got.grad is not None and want.grad is not None
            errors[f"{s}.{name}"] = float((got.grad - want.grad).norm() /
                                          want.grad.norm().clamp_min(1e-300))
    return {"stages": mine, "errors": errors,
            "loss": float(sum(losses) / m) if last else None, "ref_loss": float(ref_loss)}
