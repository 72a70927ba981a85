"""torchtitan 0.3.0's last pipeline stage, rebuilt in torch alone, run by torch's
`_PipelineScheduleRuntime` from a ppsched CSV (module level, so spawn can pickle the rank
function). Isolates silent failure 2 of issue 30 without torchtitan installed.

What is torchtitan's here (torchtitan 0.3.0, named so the reproduction can be checked):
- the last stage ends in the final norm (`nn.RMSNorm`) and `lm_head` (a bias-free Linear);
- `chunked_loss` is `ChunkedLossWrapper` (components/loss.py) reduced to one chunk: the
  stage forward skips lm_head (`_skip_lm_head`), the loss runs lm_head's forward and
  backward on a detached copy of the hidden states, then returns a loss whose grad_fn
  (`_Bridge`, torchtitan's `_DecoderOutputGradientBackProp`) hands the saved gradient to
  the stage's graph;
- `fsdp=True` wraps as `apply_fsdp_to_decoder` does even at dp = 1: one FSDP2 unit for
  `[norm, lm_head]`, one per block, the stage root, `reshard_after_forward=False` (PP).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

HIDDEN, VOCAB, SEQ, ROWS = 8, 16, 4, 2  # ROWS per microbatch


class Part(nn.Module):
    """One pipeline stage: a residual block; the last adds norm and lm_head."""

    def __init__(self, last: bool) -> None:
        super().__init__()
        self.block = nn.Linear(HIDDEN, HIDDEN)
        self.norm = nn.RMSNorm(HIDDEN) if last else None
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False) if last else None
        self.skip_lm_head = False

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = h + torch.tanh(self.block(h))
        if self.norm is not None:
            h = self.norm(h)
        if self.lm_head is not None and not self.skip_lm_head:
            h = self.lm_head(h)
        return h


class _Bridge(torch.autograd.Function):
    """torchtitan's `_DecoderOutputGradientBackProp`: the loss's backward returns the
    gradient the loss already computed for the hidden states."""

    @staticmethod
    def forward(ctx, hidden, grad, loss):  # type: ignore[no-untyped-def, override]
        ctx.save_for_backward(grad)
        return loss.detach()

    @staticmethod
    def backward(ctx, _):  # type: ignore[no-untyped-def, override]
        (grad,) = ctx.saved_tensors
        return grad, None, None


def plain_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1), target.flatten(0, 1), reduction="sum")


def chunked_loss(lm_head: nn.Module):  # type: ignore[no-untyped-def]
    """`ChunkedLossWrapper` with one chunk: lm_head's backward runs inside the loss."""

    def loss(hidden: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        leaf = hidden.detach().requires_grad_(hidden.requires_grad)
        value = plain_loss(lm_head(leaf), target)
        if not hidden.requires_grad:
            return value
        value.backward()
        return _Bridge.apply(hidden, leaf.grad, value.detach())

    return loss


def _data(m: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    return (torch.randn(m * ROWS, SEQ, HIDDEN, generator=gen),
            torch.randint(0, VOCAB, (m * ROWS, SEQ), generator=gen))


def torchtitan_chunked_loss(lm_head: nn.Module):  # type: ignore[no-untyped-def]
    """torchtitan 0.3.0's own `ChunkedLossWrapper` (2 chunks of the sequence) around its
    `CrossEntropyLoss` (sum over tokens: global_valid_tokens = 1)."""
    from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss

    wrapper = ChunkedLossWrapper.Config(num_chunks=2,
                                        loss_fn=CrossEntropyLoss.Config()).build()
    wrapper.set_lm_head(lm_head)

    def loss(hidden: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return wrapper(hidden, target, torch.tensor(1))[0]

    return loss


def run_last_stage(rank: int, world: int, csv_path: str, m: int, chunked: bool | str,
                   fsdp: bool) -> dict[str, float | None]:
    """One step of `csv_path` on 2 ranks (stage r on rank r). `chunked`: False, True
    (`chunked_loss`) or "torchtitan" (`torchtitan_chunked_loss`). Returns, per parameter
    of this rank's stage, the relative error of its gradient against the unpipelined
    model's (None: no gradient at all)."""
    assert world == 2
    torch.manual_seed(0)
    parts = [Part(False), Part(True)]
    x, y = _data(m)
    ref = [Part(False), Part(True)]
    ref[0].load_state_dict(parts[0].state_dict())
    ref[1].load_state_dict(parts[1].state_dict())
    total = sum(plain_loss(ref[1](ref[0](x[j * ROWS:(j + 1) * ROWS])),
                           y[j * ROWS:(j + 1) * ROWS]) for j in range(m))
    total.backward()  # type: ignore[union-attr]
    want = {name: p.grad for name, p in ref[rank].named_parameters()}

    mine = parts[rank]
    if fsdp:
        # Every rank builds every group (new_group is collective); each shards on its own.
        groups = [dist.new_group([r]) for r in range(world)]
        mesh = DeviceMesh.from_group(groups[rank], "cpu")
        if mine.norm is not None and mine.lm_head is not None:
            fully_shard([mine.norm, mine.lm_head], mesh=mesh, reshard_after_forward=False)
        fully_shard(mine.block, mesh=mesh, reshard_after_forward=False)
        fully_shard(mine, mesh=mesh, reshard_after_forward=False)
    loss_fn = plain_loss
    if rank == 1 and chunked:
        mine.skip_lm_head = True
        assert mine.lm_head is not None
        loss_fn = (torchtitan_chunked_loss if chunked == "torchtitan"
                   else chunked_loss)(mine.lm_head)
    stage = PipelineStage(mine, rank, world, torch.device("cpu"))
    schedule = _PipelineScheduleRuntime([stage], n_microbatches=m, loss_fn=loss_fn,
                                        scale_grads=False)
    schedule._load_csv(csv_path)
    schedule.step(*((x,) if rank == 0 else ()), target=y if rank == 1 else None)

    errors: dict[str, float | None] = {}
    for name, p in mine.named_parameters():
        got = p.grad
        if got is not None and hasattr(got, "full_tensor"):
            got = got.full_tensor()  # an FSDP2 DTensor gradient
        errors[name] = None if got is None else float(
            (got - want[name]).norm() / want[name].norm())
    return errors


def step_as_torchtitan_calls_it(schedule: _PipelineScheduleRuntime, arg_mbs: list | None,
                                kwarg_mbs: list, target_mbs: list | None,
                                losses: list | None) -> None:
    """The shim a torch 2.13 user needs under torchtitan 0.3.0: its trainer calls
    ``pp_schedule.step(arg_mbs=, kwarg_mbs=, target_mbs=, losses=, loss_kwargs=,
    return_outputs=False)`` with pre-split microbatches; 2.13's ``step`` takes whole-batch
    ``*args``/``target`` and would treat those names as model kwargs, but its
    ``_step_microbatches`` takes exactly these lists (after what ``step`` does first)."""
    for stage in schedule._stages:
        stage.has_backward = schedule._has_backward
        stage.clear_runtime_states()
    schedule._step_microbatches(arg_mbs, kwarg_mbs, target_mbs, losses, False,
                                loss_kwargs={})


def run_pre_split_step(rank: int, world: int, csv_path: str, m: int,
                       shim: bool) -> dict[str, object]:
    """One step of `csv_path` with microbatches passed pre-split, as torchtitan 0.3.0 does:
    through torch 2.13's ``step(arg_mbs=...)`` (`shim` False) or `step_as_torchtitan_calls_it`.
    Returns the error text, or the gradient errors against the unpipelined model."""
    torch.manual_seed(0)
    parts = [Part(False), Part(True)]
    x, y = _data(m)
    ref = [Part(False), Part(True)]
    for mine_ref, part in zip(ref, parts, strict=True):
        mine_ref.load_state_dict(part.state_dict())
    total = sum(plain_loss(ref[1](ref[0](x[j * ROWS:(j + 1) * ROWS])),
                           y[j * ROWS:(j + 1) * ROWS]) for j in range(m))
    total.backward()  # type: ignore[union-attr]
    stage = PipelineStage(parts[rank], rank, world, torch.device("cpu"))
    schedule = _PipelineScheduleRuntime([stage], n_microbatches=m, loss_fn=plain_loss,
                                        scale_grads=False)
    schedule._load_csv(csv_path)
    arg_mbs = [(x[j * ROWS:(j + 1) * ROWS],) for j in range(m)] if rank == 0 else None
    target_mbs = [y[j * ROWS:(j + 1) * ROWS] for j in range(m)] if rank == 1 else None
    kwarg_mbs: list[dict[str, object]] = [{} for _ in range(m)]
    losses: list[torch.Tensor] | None = [] if rank == 1 else None
    if not shim:
        try:
            schedule.step(arg_mbs=arg_mbs, kwarg_mbs=kwarg_mbs, target_mbs=target_mbs,
                          losses=losses, loss_kwargs={}, return_outputs=False)
        except Exception as exc:  # what torch 2.13 says to torchtitan's call
            return {"error": f"{type(exc).__name__}: {exc}"[:300]}
        return {"error": None}
    step_as_torchtitan_calls_it(schedule, arg_mbs, kwarg_mbs, target_mbs, losses)
    return {"errors": {name: float((p.grad - q.grad).norm() / q.grad.norm())
                       for (name, p), q in zip(parts[rank].named_parameters(),
                                               ref[rank].parameters(), strict=True)}}
