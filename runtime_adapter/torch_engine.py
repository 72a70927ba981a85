"""``engine="torch"``: a ppsched schedule run by torch.distributed.pipelining's own runtime.

Each local stage becomes a torch ``PipelineStage`` and the step runs in torch's
``_PipelineScheduleRuntime``, fed with our per-rank action lists (the torch CSV actions of
`solver.render.torch_csv`: our ``B`` is torch's ``I``, our ``BW`` its ``B``) and lowered by
torch's own passes (``_add_send_recv``, ``_add_unshard_reshard``, ``_add_reduce_grad``):
torch does every send and receive. This is the path torchtitan takes for a custom schedule
(``pipeline_parallel_schedule_csv``), so what torchtitan composes with composes here:
stages wrapped in FSDP2 (``fully_shard``) are unsharded, resharded and reduce-scattered by
torch's runtime.

Usage (one process per rank, ``torch.distributed`` initialised)::

    engine = TorchPipelineEngine(schedule, {stage: module, ...}, loss_fn, group=pp_group)
    result = engine.run(microbatches, targets)        # loss on the last stage's rank
    torch.optim.AdamW(engine.parameters()).step()

What differs from torch's defaults, and why:

- Loss scaling: torch's ``scale_grads=True`` divides each stage's ``.grad`` by the number
  of microbatches after the step. Two stages of one rank sharing a parameter (the tied
  embedding and head under the V placement) would divide it twice, and accumulated
  gradients of earlier calls would be divided too. The engine instead gives torch
  ``loss_fn(output, target) / m`` with ``scale_grads=False``: the same mean-of-microbatch
  gradient, exactly once. The reported loss is the mean of the microbatches' losses.
- Autocast: torch runs ``submod(*args)`` bare; the engine's stages run the forward (also
  torch's shape-inference forward) and the loss under ``torch.autocast``.
- Data parallel: with FSDP2-wrapped stages torch's runtime reduce-scatters after each
  stage's last backward. ``DistributedDataParallel`` only reduces when its autograd hooks
  fire, which torch's split backward (``I``/``W``, ``torch.autograd.grad``) never does:
  the engine refuses DDP with a schedule that splits B and W instead of returning local
  gradients. Unwrapped stages with ``dp_group=`` are averaged over it after the step.
- Weights tied across ranks (``tied=``): summed over their group after the step, as
  torchtitan users do by hand.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
from ppsched.runtime_adapter import heartbeat, ties
from ppsched.runtime_adapter.comm import PipelinePeerLost, PipelineTimeout, backend_reason
from ppsched.runtime_adapter.dp_wrappers import check_for_torch
from ppsched.runtime_adapter.executor import StepResult
from ppsched.runtime_adapter.stage import LossFn
from ppsched.solver.model import Schedule, parse_schedule
from ppsched.solver.render import DROPPED_KINDS, dropped_note
from torch import nn
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import _Action, _PipelineScheduleRuntime
from torch.distributed.tensor import DTensor


class _AutocastStage(PipelineStage):
    """A `PipelineStage` whose forwards (the real ones and torch's shape inference) run
    under ``torch.autocast``: the received buffers then get the autocast output dtype."""

    def __init__(self, *args: Any, autocast_dtype: torch.dtype | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.autocast_dtype = autocast_dtype

    def _autocast(self) -> torch.autocast:
        return torch.autocast(self.device.type, dtype=self.autocast_dtype,
                              enabled=self.autocast_dtype is not None)

    def forward_maybe_with_nosync(self, *args: Any, **kwargs: Any) -> Any:
        with self._autocast():
            return super().forward_maybe_with_nosync(*args, **kwargs)

    def _compute_outputs(self, *args: torch.Tensor, module: nn.Module,
                         **kwargs: Any) -> Any:
        with self._autocast():
            return super()._compute_outputs(*args, module=module, **kwargs)


def torch_actions(schedule: Schedule) -> dict[int, list[_Action | None]]:
    """Per pipeline rank, the schedule's compute actions as torch's ``_Action`` s."""
    return {rank: [_Action.from_str(op.to_torch()) for op in ops]
            for rank, ops in enumerate(schedule.orders())}


def _splits_backward(schedule: Schedule) -> bool:
    return any(op.kind == "W" for ops in schedule.orders() for op in ops)


class TorchPipelineEngine:
    """Runs a ppsched schedule for this rank's stages in torch's pipelining runtime.

    Args:
        schedule: a `Schedule` or its JSON object (DESIGN.md section 4); it must not hold
            recompute or offload ops (torch has no such actions: use ``engine="ppsched"``).
        stages: this rank's stage modules by global stage index; each may be wrapped in
            FSDP2 over the data-parallel mesh (`runtime_adapter.dp_wrappers.
            fully_shard_stages`, which refuses a parameter two stages of the rank share),
            or in DDP when the schedule does not split B and W.
        loss_fn: ``loss_fn(output, target)`` of one microbatch; the step's loss is the mean
            over microbatches.
        group: the pipeline's process group (default: the world).
        dp_group: the data-parallel group of unwrapped stages: gradients are averaged over
            it after the step. Leave it None for wrapped stages (the wrapper reduces).
        tied: parameters held as copies on several pipeline ranks, each with the group of
            the ranks holding one: their gradients are summed over it after the step.
        autocast_dtype: run every forward and the loss under ``torch.autocast`` with this
            dtype; parameters and gradients keep their own dtype.
        check_grads: debug mode: after each step, raise `ties.MissingGradients` naming
            every parameter that requires grad and was left without a gradient (torch's
            split backward can skip one; see issue 30's torchtitan case).

    Raises:
        ValueError: recompute/offload ops in the schedule, stages that are not this
            rank's, DDP with a split backward, or a wrapper together with ``dp_group``.
    """

    def __init__(self, schedule: Schedule | dict[str, Any], stages: Mapping[int, nn.Module],
                 loss_fn: LossFn, *, group: dist.ProcessGroup | None = None,
                 dp_group: dist.ProcessGroup | None = None,
                 tied: Sequence[tuple[nn.Parameter, dist.ProcessGroup]] = (),
                 autocast_dtype: torch.dtype | None = None, check_grads: bool = False,
                 ) -> None:
        self.schedule = schedule if isinstance(schedule, Schedule) else parse_schedule(schedule)
        problem = self.schedule.profile.problem
        note = dropped_note(self.schedule)
        if note is not None:
            raise ValueError(f"invalid 'schedule': it holds {'/'.join(DROPPED_KINDS)} ops "
                             f"that engine='torch' cannot run ({note}); expected a schedule "
                             "without activation policies, or engine='ppsched'")
        rank = dist.get_rank(group)
        expected = sorted(problem.rank_to_stages[rank])
        if sorted(stages) != expected:
            raise ValueError(f"invalid 'stages': got stages {sorted(stages)} on pipeline "
                             f"rank {rank}; expected {expected} as the schedule places them")
        check_for_torch(stages, dp_group, _splits_backward(self.schedule),
                        self.schedule.method)
        self.m = self.schedule.profile.num_microbatches
        self.stages = dict(stages)
        self.dp_group = dp_group
        self.tied = ties.checked_ties(tied, stages)
        self.check_grads = check_grads
        self.rank = rank
        self._group = group
        self._steps = 0
        heartbeat.start()
        first = next((p for mod in stages.values() for p in mod.parameters()), None)
        device = first.device if first is not None else torch.device("cpu")
        if isinstance(first, DTensor):
            device = first.to_local().device
        self.device = device
        self._pipeline_stages = [
            _AutocastStage(stages[s], s, problem.num_stages, device, group=group,
                           autocast_dtype=autocast_dtype) for s in expected]
        m = self.m

        def scaled_loss(output: Any, target: Any) -> torch.Tensor:
            # The mean over microbatches, as our executor's, without torch's per-stage
            # division of .grad afterwards (see the module's docstring).
            with torch.autocast(device.type, dtype=autocast_dtype,
                                enabled=autocast_dtype is not None):
                return loss_fn(output, target) / m

        self._runtime = _PipelineScheduleRuntime(self._pipeline_stages, n_microbatches=m,
                                                 loss_fn=scaled_loss, scale_grads=False)
        # torch's lowering adds UNSHARD/RESHARD, REDUCE_GRAD and the sends and receives.
        self._runtime._prepare_schedule_with_comms(torch_actions(self.schedule))

    def parameters(self) -> list[nn.Parameter]:
        """This rank's stage parameters (for the optimizer), each object once."""
        seen: dict[int, nn.Parameter] = {}
        for module in self.stages.values():
            for p in module.parameters():
                seen.setdefault(id(p), p)
        return list(seen.values())

    def run(self, microbatches: Sequence[torch.Tensor] | None = None,
            targets: Sequence[torch.Tensor] | None = None, *,
            accumulate: bool = False, sync: bool = True) -> StepResult:
        """Run this rank's actions of one step; gradients end in the parameters' ``.grad``.

        Args:
            microbatches: the step's `m` inputs (needed on the rank of stage 0).
            targets: the `m` targets (needed on the rank of the last stage).
            accumulate: add to the ``.grad`` of earlier calls instead of starting from none.
            sync: reduce over ``dp_group`` and ``tied`` in this call; pass False on all
                but the last call of an accumulation (a tie's sum must run once). FSDP2
                and DDP stages reduce in every call, which accumulates correctly.

        Raises:
            ValueError: missing or wrongly counted microbatches or targets.
        """
        problem = self.schedule.profile.problem
        has_first = 0 in self.stages
        has_last = problem.num_stages - 1 in self.stages
        args: tuple[torch.Tensor, ...] = ()
        target = None
        # On the stages' device (a user's batches often come from a CPU data loader).
        if has_first:
            args = (torch.cat(list(self._checked("microbatches", microbatches))
                              ).to(self.device),)
        if has_last:
            target = torch.cat(list(self._checked("targets", targets))).to(self.device)
        if not accumulate:
            for p in self.parameters():
                p.grad = None
        losses: list[torch.Tensor] = []
        self._steps += 1
        # torch cuts the concatenation back into the same m microbatches.
        with _failures_named(self.rank, self._steps, self._group):
            self._runtime.step(*args, target=target, losses=losses, return_outputs=False)
        if sync:
            self._reduce()
        if self.check_grads:
            ties.check_grads(self.stages, self.rank)
        loss = float(sum(x.detach().double() for x in losses)) if has_last else None
        return StepResult(loss)

    def _checked(self, name: str, values: Sequence[torch.Tensor] | None,
                 ) -> Sequence[torch.Tensor]:
        if values is None or len(values) != self.m:
            got = "none" if values is None else f"{len(values)}"
            raise ValueError(f"invalid '{name}': got {got}; expected {self.m} tensors (the "
                             "schedule's microbatches) on this rank")
        return values

    def _reduce(self) -> None:
        """Average over ``dp_group`` (unwrapped stages), then sum the cross-rank ties."""
        params = [p for p in self.parameters() if p.grad is not None]
        if self.dp_group is not None:
            size = dist.get_world_size(self.dp_group)
            works = [dist.all_reduce(_local(p.grad), group=self.dp_group, async_op=True)
                     for p in params if p.grad is not None]
            for work in works:
                work.wait()
            for p in params:
                assert p.grad is not None
                p.grad.div_(size)
        for p, tie_group in self.tied:
            if p.grad is not None:
                dist.all_reduce(_local(p.grad), group=tie_group)


class _LastAction(logging.Handler):
    """Keeps the action torch's runtime names when an action raises (it logs "caught
    exception at step %s when running action %s" before re-raising)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.action: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if "when running action" in str(record.msg) and len(record.args or ()) >= 2:
            self.action = str(record.args[1])  # type: ignore[index]


@contextmanager
def _failures_named(rank: int, step: int, group: dist.ProcessGroup | None) -> Iterator[None]:
    """A backend error inside torch's step (gloo's "Connection closed by peer", ...)
    becomes `PipelinePeerLost` naming this rank, torch's action and the ranks that did not
    stopped beating (`runtime_adapter.heartbeat`)."""
    seen = _LastAction()
    torch_log = logging.getLogger(_PipelineScheduleRuntime.__module__)
    torch_log.addHandler(seen)
    start = time.monotonic()
    try:
        yield
    except RuntimeError as exc:
        if isinstance(exc, PipelineTimeout) or not _is_backend_failure(exc):
            raise
        elapsed = time.monotonic() - start
        dead, failed = heartbeat.dead_ranks(group)
        action = f"action {seen.action}" if seen.action else "an action"
        raise PipelinePeerLost(
            f"rank {dist.get_rank()} (pipeline rank {rank}) at {action} of step {step}: the "
            f"backend failed after {elapsed:.1f} s ({backend_reason(exc)}); "
            f"{heartbeat.describe(dead, failed)}") from None
    finally:
        torch_log.removeHandler(seen)


def _is_backend_failure(exc: RuntimeError) -> bool:
    """A communication failure, as opposed to an error of the model or of torch's
    runtime checks (which keep their own message)."""
    text = str(exc)
    return any(word in text for word in ("Connection closed", "Connection reset", "pair.cc",
                                         "NCCL", "Broken pipe", "Timed out", "timed out"))


def _local(t: torch.Tensor) -> torch.Tensor:
    """The tensor a collective reduces: an FSDP2 gradient's local shard (the ranks of a
    tie hold the same shapes on the same mesh, hence the same shards)."""
    return t.to_local() if isinstance(t, DTensor) else t
