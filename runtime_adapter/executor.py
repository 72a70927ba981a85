"""The executor: one training step's F, B, W and BW ops, in exactly the schedule's order.

Each rank walks its op list. Before an op it posts, in one ``batch_isend_irecv``, the sends
the previous op produced and the receive this op needs, preceded by every earlier message
of the same sender that is not yet posted: receives on a channel are always posted in the
sender's send order, the one order NCCL (whose point-to-point ops carry no tags) can
match, and the order gloo matches too. Sends never block a rank; a rank blocks only on the
receive its next op needs, exactly as the cost model assumes, so a schedule the simulator
accepts (no deadlock) runs without deadlock. Every wait has a deadline.

Usage (one process per rank, ``torch.distributed`` initialised)::

    executor = PipelineExecutor(schedule, {stage: module, ...}, loss_fn)
    result = executor.run(microbatches, targets)      # loss on the last stage's rank
    step_optimizer(optimizer, executor.parameters())  # runtime_adapter.optim

Data parallel (``dp_group``), weights tied across ranks (``tied``), autocast
(``autocast_dtype``) and gradient accumulation (``run(accumulate=..., sync=...)``) are
the executor's own: B/W set ``.grad`` themselves, so DDP's and FSDP's hooks never fire. A
DDP-wrapped stage is run unwrapped and reduced over its DDP group; FSDP2 is refused
(`runtime_adapter.dp_wrappers`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from ppsched.runtime_adapter import heartbeat, ties
from ppsched.runtime_adapter.comm import (
    PipelinePeerLost,
    PipelineTimeout,
    ScheduleMismatch,
    posting,
    wait,
)
from ppsched.runtime_adapter.copy_lane import CopyLanes
from ppsched.runtime_adapter.dp_wrappers import unwrap_for_ppsched
from ppsched.runtime_adapter.plan import Message, RankPlan, check_schedule, plan_rank
from ppsched.runtime_adapter.stage import LossFn, Policy, StageRunner
from ppsched.runtime_adapter.timeline import OpRecord
from ppsched.runtime_adapter.values import (
    Layout,
    Value,
    call,
    decode_layout,
    encode_layout,
    flatten,
    unflatten,
)
from ppsched.solver.model import Op, Schedule, parse_schedule
from torch import nn

log = logging.getLogger(__name__)


@dataclass
class StepResult:
    """What one step produced on this rank.

    Attributes:
        loss: the mean of the microbatches' losses, on the rank of the last stage (None
            elsewhere).
        records: each op's start and end in seconds from the step's start (when recorded).
    """

    loss: float | None
    records: list[OpRecord] = field(default_factory=list)


class PipelineExecutor:
    """Runs a schedule's ops for this rank's stages with torch.distributed point-to-point.

    Args:
        schedule: a `Schedule` or its JSON object (DESIGN.md section 4).
        stages: this rank's stage modules by global stage index; their Linears become
            `SplitLinear` in place (see `runtime_adapter.weight_grad`).
        loss_fn: ``loss_fn(output, target)`` of one microbatch; the step's loss is the mean
            over microbatches.
        group: the pipeline's process group (default: the world).
        timeout_s: the longest any single wait may take before `PipelineTimeout`.
        dp_group: the data-parallel group of this rank's replicas (same stages, other
            data). Each parameter's gradient is averaged over it as soon as its last W of
            the step has run, overlapped with the rest of the step. Stages wrapped in
            ``DistributedDataParallel`` are run unwrapped and their DDP group serves as
            `dp_group` (DDP's own hooks would never fire: B/W set ``.grad``
            themselves); FSDP2 (``fully_shard``) stages are refused: use
            ``engine="torch"`` (`runtime_adapter.torch_engine`) for those.
        tied: parameters held as copies on several pipeline ranks (a tied embedding and
            head), each with the group of the ranks that hold a copy: their gradients are
            summed over it at the end of the step. A tie between stages of one rank needs
            nothing: it is one parameter object, and autograd accumulates both uses.
        autocast_dtype: run every F under ``torch.autocast`` with this dtype (e.g.
            ``torch.bfloat16``); parameters and gradients stay in their own dtype.
        check_grads: debug mode: after each step, raise `ties.MissingGradients` naming
            every parameter that requires grad and was left without a gradient.

    Raises:
        ScheduleMismatch: on every rank, when any rank's stages, the world size or the
            orders do not match the schedule; found before any point-to-point traffic.
        ValueError: an FSDP2 stage, or DDP stages that do not agree with each other or
            with `dp_group` (`runtime_adapter.dp_wrappers.unwrap_for_ppsched`); a tied
            parameter that is not one of the stages' or differs in shape across its group
            (`runtime_adapter.ties.checked_ties`).
    """

    def __init__(self, schedule: Schedule | dict[str, Any], stages: Mapping[int, nn.Module],
                 loss_fn: LossFn, *, group: dist.ProcessGroup | None = None,
                 timeout_s: float = 60.0, dp_group: dist.ProcessGroup | None = None,
                 tied: Sequence[tuple[nn.Parameter, dist.ProcessGroup]] = (),
                 autocast_dtype: torch.dtype | None = None, check_grads: bool = False,
                 ) -> None:
        self.schedule = schedule if isinstance(schedule, Schedule) else parse_schedule(schedule)
        # A DDP stage runs unwrapped, reduced over its group by us (its hooks would not
        # fire); FSDP2 is refused (see runtime_adapter.dp_wrappers).
        stages, dp_group = unwrap_for_ppsched(stages, dp_group)
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self.timeout_s = timeout_s
        first = next((p for m in stages.values() for p in m.parameters()), None)
        self.device = first.device if first is not None else torch.device("cpu")
        error = check_schedule(self.schedule, self.rank, self.world_size, set(stages))
        self._agree(error)
        self.plan: RankPlan = plan_rank(self.schedule, self.rank)
        # Activation policies (DESIGN.md 6.3): an R in the order means its F keeps only
        # its input; an O, that its F's saved tensors go to the host and back.
        self.policies: dict[tuple[int, int], Policy] = {
            (op.stage, op.microbatch): "recompute" if op.kind == "R" else "offload"
            for op in self.plan.ops if op.kind in ("R", "O")}
        m = self.schedule.profile.num_microbatches
        last = self.plan.num_stages - 1
        # One pair of copy lanes per rank, as the cost model prices them (DESIGN.md 6.3).
        self.lanes = CopyLanes(self.device) if "offload" in self.policies.values() else None
        self.runners = {s: StageRunner(s, stages[s], is_last=s == last, loss_fn=loss_fn,
                                       num_microbatches=m, autocast_dtype=autocast_dtype,
                                       lanes=self.lanes)
                        for s in self.plan.stages}
        self.dp_group = dp_group
        self.tied = ties.checked_ties(tied, stages)
        self.check_grads = check_grads
        heartbeat.start()
        self._reduce_after = self._reduction_points()
        self._in_meta: dict[int, Layout] = {}
        self._out_meta: dict[int, Layout] = {}
        self._input_meta: Layout | None = None
        self._channel_index = {msg: (src, k) for src, msgs in self.plan.recv_order.items()
                               for k, msg in enumerate(msgs)}

    def parameters(self) -> list[nn.Parameter]:
        """This rank's stage parameters (for the optimizer), each object once: a weight
        tied between two stages of this rank is listed, and stepped, once."""
        seen: dict[int, nn.Parameter] = {}
        for s in self.plan.stages:
            for p in self.runners[s].module.parameters():
                seen.setdefault(id(p), p)
        return list(seen.values())

    def _reduction_points(self) -> dict[int, list[nn.Parameter]]:
        """Op index -> the trainable parameters whose last W of the step it is."""
        last_w = {op.stage: i for i, op in enumerate(self.plan.ops) if op.kind in ("W", "BW")}
        last: dict[int, tuple[int, nn.Parameter]] = {}
        for s in self.plan.stages:
            for p in self.runners[s].module.parameters():
                if p.requires_grad:
                    i = max(last_w[s], last.get(id(p), (-1, p))[0])
                    last[id(p)] = (i, p)
        points: dict[int, list[nn.Parameter]] = {}
        for i, p in last.values():
            points.setdefault(i, []).append(p)
        return points

    # Setup.

    def _peer(self, rank: int) -> int:
        return rank if self.group is None else dist.get_global_rank(self.group, rank)

    def _agree(self, error: str | None) -> None:
        """Every rank learns whether any rank refused the schedule (one small all-reduce)."""
        flags = torch.zeros(self.world_size, dtype=torch.int64, device=self.device)
        flags[self.rank] = 1 if error else 0
        work = dist.all_reduce(flags, group=self.group, async_op=True)
        wait(work, time.monotonic() + self.timeout_s,
             f"rank {self.rank} checking the schedule with the other ranks")
        if error:
            raise ScheduleMismatch(f"rank {self.rank} refuses the schedule: {error}")
        bad = [r for r, x in enumerate(flags.tolist()) if x]
        if bad:
            raise ScheduleMismatch(f"rank(s) {bad} refused the schedule (see their error); "
                                   f"rank {self.rank} stops before any traffic")

    def _handshake(self, example: Value | None) -> None:
        """Learn every boundary's layout (tensors, shapes, dtypes), in stage order (once
        per executor).

        Each stage runs one no-grad forward on zeros of its input's layout (with the random
        state forked, so it draws no number of the user's) and passes its output's layout
        on (its length, then the layout); a chain in stage order cannot deadlock.
        """
        plan, deadline = self.plan, time.monotonic() + self.timeout_s
        layout: Layout | None = None
        for s in range(plan.num_stages):
            here = plan.stage_to_rank[s]
            if here != self.rank:
                continue
            if s == 0:
                assert example is not None, "the rank of stage 0 has the microbatches"
                layout = flatten(example, "microbatches")[0]
            elif plan.stage_to_rank[s - 1] != self.rank:
                src = plan.stage_to_rank[s - 1]
                what = (f"rank {self.rank} waiting for the activation layout of stage "
                        f"{s - 1} from rank {src}")
                size = torch.zeros(1, dtype=torch.int64, device=self.device)
                with posting(what):
                    work = dist.irecv(size, self._peer(src), self.group)
                wait(work, deadline, what)
                data = torch.zeros(int(size.item()), dtype=torch.int64, device=self.device)
                with posting(what):
                    work = dist.irecv(data, self._peer(src), self.group)
                wait(work, deadline, what)
                layout = decode_layout(data)
            assert layout is not None, "stage s-1 ran on this rank just before"
            self._in_meta[s] = layout
            # The layout probe must leave the user's random state as it found it: a
            # dropout in the probe would otherwise draw the numbers the first step's masks
            # are seeded with, and step one would differ from the seeded model.
            cuda = self.device.type == "cuda"
            with torch.random.fork_rng(devices=[self.device] if cuda else []), \
                    torch.no_grad(), self.runners[s].autocast():
                zeros = [torch.zeros(shape, dtype=dtype, device=self.device)
                         for shape, dtype in layout.metas]
                out = call(self.runners[s].module, unflatten(layout, zeros))
            if s + 1 == plan.num_stages:
                continue
            layout = flatten(out, f"output of stage {s}")[0]
            self._out_meta[s] = layout
            if plan.stage_to_rank[s + 1] != self.rank:
                dst = plan.stage_to_rank[s + 1]
                what = (f"rank {self.rank} sending the activation layout of stage {s} to "
                        f"rank {dst}")
                data = encode_layout(layout, self.device)
                size = torch.tensor([data.numel()], dtype=torch.int64, device=self.device)
                for tensor in (size, data):
                    with posting(what):
                        work = dist.isend(tensor, self._peer(dst), self.group)
                    wait(work, deadline, what)

    # The step.

    def run(self, microbatches: Sequence[torch.Tensor] | None = None,
            targets: Sequence[torch.Tensor] | None = None, *, record: bool = False,
            accumulate: bool = False, sync: bool = True,
            loss_scale: float = 1.0) -> StepResult:
        """Run this rank's ops of one step; gradients end in the parameters' ``.grad``.

        Args:
            microbatches: the step's `m` inputs (needed on the rank of stage 0).
            targets: the `m` targets for `loss_fn` (needed on the rank of the last stage).
            record: measure each op's start and end (a barrier aligns the ranks' clocks;
                on CUDA each op is synchronised).
            accumulate: add this step's gradients to the ``.grad`` left by earlier calls
                (gradient accumulation) instead of starting from none.
            sync: reduce gradients over ``dp_group`` and ``tied`` in this call; pass False
                on all but the last call of an accumulation (as DDP's ``no_sync``).
            loss_scale: multiply each loss by this before its backward (fp16 loss scaling;
                see `runtime_adapter.optim.LossScaler`); the reported loss is unscaled.

        Raises:
            ValueError: missing or wrongly sized microbatches or targets.
            PipelineTimeout: a wait took longer than ``timeout_s``.
            MissingGradients: with ``check_grads``, a parameter left without a gradient.
        """
        inputs, labels = self._step_inputs(microbatches, targets)
        if not self._in_meta:
            self._handshake(inputs[0] if inputs is not None else None)
        self._start_step(accumulate=accumulate, loss_scale=loss_scale)
        if record:
            self._align_clocks()
        state = _StepState()
        try:
            records, reducing = self._walk_ops(state, inputs, labels, record=record,
                                               sync=sync)
            self._drain(state, reducing, sync=sync)
        except PipelinePeerLost as exc:
            # The error names the neighbour whose connection failed; the heartbeats name
            # the rank that died, which may be further down the chain.
            dead, failed = heartbeat.dead_ranks(self.group)
            raise PipelinePeerLost(f"{exc}; {heartbeat.describe(dead, failed)}") from None
        if self.check_grads:
            ties.check_grads({s: r.module for s, r in self.runners.items()}, self.rank)
        return StepResult(self._step_loss(), records)

    # The step's phases.

    def _step_inputs(self, microbatches: Sequence[torch.Tensor] | None,
                     targets: Sequence[torch.Tensor] | None,
                     ) -> tuple[list[Value] | None, list[Value] | None]:
        """The step's microbatches (on the rank of stage 0) and targets (on the rank of
        the last stage), checked and moved to the device; None on the other ranks."""
        plan, m = self.plan, self.schedule.profile.num_microbatches
        inputs = self._checked("microbatches", microbatches, m) if 0 in plan.stages else None
        labels = (self._checked("targets", targets, m)
                  if plan.num_stages - 1 in plan.stages else None)
        if inputs is not None:
            layout = flatten(inputs[0], "microbatches")[0]
            if self._input_meta is not None and layout != self._input_meta:
                raise ValueError(f"invalid 'microbatches': got {_describe(layout)}; expected "
                                 f"{_describe(self._input_meta)} as in the first step")
            self._input_meta = layout
        return inputs, labels

    def _start_step(self, *, accumulate: bool, loss_scale: float) -> None:
        """Clear the gradients (unless accumulating) and the losses; set the loss scale."""
        for runner in self.runners.values():
            if not accumulate:
                for p in runner.module.parameters():
                    p.grad = None
            runner.losses.clear()
            runner.loss_scale = loss_scale

    def _align_clocks(self) -> None:
        """A barrier, so that the ranks' recorded times share one start."""
        work = dist.all_reduce(torch.zeros(1, device=self.device), group=self.group,
                               async_op=True)
        wait(work, time.monotonic() + self.timeout_s, f"rank {self.rank} at the "
             "barrier that starts a recorded step")

    def _walk_ops(self, state: _StepState, inputs: list[Value] | None,
                  labels: list[Value] | None, *, record: bool, sync: bool,
                  ) -> tuple[list[OpRecord], list[tuple[Any, nn.Parameter]]]:
        """Run this rank's ops in order: post, receive, compute, queue the sends, and
        start each parameter's data-parallel reduction after its last W. Returns the ops'
        records (when `record`) and the reductions started."""
        plan = self.plan
        synchronize = record and self.device.type == "cuda"
        t0 = time.perf_counter()
        records: list[OpRecord] = []
        reducing: list[tuple[Any, nn.Parameter]] = []
        for i, op in enumerate(plan.ops):
            needed = plan.needs[i]
            self._post(state, needed, op)
            received = self._receive(state, needed, op) if needed is not None else None
            if synchronize:
                torch.cuda.synchronize(self.device)
            start = time.perf_counter()
            produced = self._compute(op, received, inputs, labels, state)
            if synchronize:
                torch.cuda.synchronize(self.device)
            if record:
                records.append(OpRecord(op.kind, op.stage, op.microbatch, start - t0,
                                        time.perf_counter() - t0))
            self._queue_sends(state, i, op, produced)
            state.reap()
            if sync and self.dp_group is not None and i in self._reduce_after:
                reducing += self._start_reduction(self._reduce_after[i])
        return records, reducing

    def _queue_sends(self, state: _StepState, i: int, op: Op, produced: Any) -> None:
        """Queue what op `i` produced for the ranks that receive it (posted before the
        next op, `_post`)."""
        for msg in self.plan.sends[i]:
            # A gradient of no tensors: the stage's input had none in floating point.
            assert produced is not None or msg.kind == "gradient", f"{op} sends {msg}"
            tensors = ([] if produced is None else
                       flatten(produced, "output")[1] if msg.kind == "activation"
                       else [produced] if isinstance(produced, torch.Tensor)
                       else list(produced))
            state.to_send.append((msg, [t.contiguous() for t in tensors]))

    def _drain(self, state: _StepState, reducing: list[tuple[Any, nn.Parameter]], *,
               sync: bool) -> None:
        """After the last op: post the last sends, wait for every send, then finish the
        gradient reductions (when `sync`)."""
        self._post(state, None)
        deadline = time.monotonic() + self.timeout_s
        for msg, (works, _) in state.sending.items():
            for work in works:
                wait(work, deadline, f"rank {self.rank} after its last op, sending "
                     f"{msg.describe()}")
        assert not state.posted, f"received but unused: {list(state.posted)}"
        if sync:
            self._finish_reductions(reducing, deadline)

    def _step_loss(self) -> float | None:
        """The mean of the microbatches' losses on the last stage's rank; None elsewhere."""
        last = self.plan.num_stages - 1
        if last not in self.plan.stages:
            return None
        losses = self.runners[last].losses
        # One host read per step, after all the work was queued.
        m = self.schedule.profile.num_microbatches
        return float(torch.stack([losses[j] for j in range(m)]).double().mean())

    def _start_reduction(self, params: list[nn.Parameter]) -> list[tuple[Any, nn.Parameter]]:
        """Start the data-parallel sums of `params`' gradients (their last W has run)."""
        started = []
        for p in params:
            if p.grad is None:  # unused in this step on every replica alike
                p.grad = torch.zeros_like(p)
            with posting(f"rank {self.rank} starting the data-parallel reduction of a "
                         f"gradient of shape {list(p.shape)} over ranks "
                         f"{dist.get_process_group_ranks(self.dp_group)}"):
                work = dist.all_reduce(p.grad, group=self.dp_group, async_op=True)
            started.append((work, p))
        return started

    def _finish_reductions(self, reducing: list[tuple[Any, nn.Parameter]],
                           deadline: float) -> None:
        """Wait for the data-parallel sums, average them, then sum the cross-rank ties."""
        for work, p in reducing:
            wait(work, deadline, f"rank {self.rank} after its last op, waiting for the "
                 f"data-parallel reduction of a gradient of shape {list(p.shape)} from "
                 "its replicas")
        if self.dp_group is not None:
            size = dist.get_world_size(self.dp_group)
            for _, p in reducing:
                assert p.grad is not None
                p.grad.div_(size)
        works = []
        for p, group in self.tied:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            with posting(f"rank {self.rank} starting the sum of the tied weight of shape "
                         f"{list(p.shape)} over ranks {dist.get_process_group_ranks(group)}"):
                work = dist.all_reduce(p.grad, group=group, async_op=True)
            works.append((work, p, group))
        for work, p, group in works:
            peers = dist.get_process_group_ranks(group)
            wait(work, deadline, f"rank {self.rank} after its last op, waiting for the sum "
                 f"of the tied weight of shape {list(p.shape)} over ranks {peers}")

    def _checked(self, name: str, values: Sequence[Value] | None, m: int) -> list[Value]:
        if values is None or len(values) != m:
            got = "None" if values is None else f"{len(values)} tensors"
            raise ValueError(f"invalid '{name}': got {got}; expected num_microbatches = {m} "
                             f"tensors on rank {self.rank}")
        moved = []
        for v in values:
            layout, tensors = flatten(v, name)
            moved.append(unflatten(layout, [t.to(self.device) for t in tensors]))
        return moved

    def _post(self, state: _StepState, needed: Message | None, op: Op | None = None) -> None:
        """Post pending sends and the receives up to `needed` in its sender's order."""
        ops: list[dist.P2POp] = []
        kinds: list[tuple[str, Message, list[torch.Tensor]]] = []
        for msg, tensors in state.to_send:
            ops += [dist.P2POp(dist.isend, t, self._peer(msg.dst_rank), self.group)
                    for t in tensors]
            kinds.append(("send", msg, tensors))
        state.to_send.clear()
        if needed is not None and needed not in state.posted:
            src, upto = self._channel_index[needed]
            channel = self.plan.recv_order[src]
            for k in range(state.next_recv.get(src, 0), upto + 1):
                msg = channel[k]
                buffers = [torch.empty(shape, dtype=dtype, device=self.device)
                           for shape, dtype in self._recv_meta(msg)]
                ops += [dist.P2POp(dist.irecv, b, self._peer(src), self.group)
                        for b in buffers]
                kinds.append(("recv", msg, buffers))
            state.next_recv[src] = upto + 1
        if not kinds:
            return
        before = (f"before op {op.kind}{op.microbatch} of stage {op.stage}" if op is not None
                  else "after its last op")
        peers = sorted({self._peer(msg.dst_rank if kind == "send" else msg.src_rank)
                        for kind, msg, _ in kinds})
        with posting(f"rank {self.rank} {before}, posting "
                     + ", ".join(f"the {k} of {msg.describe()}" for k, msg, _ in kinds)
                     + f" (peer rank(s) {peers})"):
            works = iter(dist.batch_isend_irecv(ops) if ops else [])
        for kind, msg, tensors in kinds:
            mine = [next(works) for _ in tensors]
            (state.sending if kind == "send" else state.posted)[msg] = (mine, tensors)

    def _recv_meta(self, msg: Message) -> tuple[tuple[torch.Size, torch.dtype], ...]:
        if msg.kind == "activation":
            return self._in_meta[msg.dst_stage].metas
        return self._out_meta[msg.dst_stage].grad_metas

    def _receive(self, state: _StepState, msg: Message, op: Op) -> Any:
        """Wait for `msg`: an activation comes back in its layout, a gradient as a list."""
        works, buffers = state.posted.pop(msg)
        deadline = time.monotonic() + self.timeout_s
        for work, buffer in zip(works, buffers, strict=True):
            shape = "x".join(map(str, buffer.shape))
            wait(work, deadline,
                 f"rank {self.rank} before op {op.kind}{op.microbatch} of stage {op.stage} "
                 f"(torch name {op.to_torch()}), waiting for rank {msg.src_rank} to send "
                 f"{msg.describe()} ({buffer.dtype} [{shape}])")
        if msg.kind == "activation":
            return unflatten(self._in_meta[msg.dst_stage], buffers)
        return buffers

    def _compute(self, op: Op, received: Any, inputs: list[Value] | None,
                 labels: list[torch.Tensor] | None, state: _StepState) -> Any:
        s, j = op.stage, op.microbatch
        runner = self.runners[s]
        if op.kind == "F":
            if s == 0:
                assert inputs is not None
                x = inputs[j]
            else:
                x = received if received is not None else state.local.pop(("activation", s, j))
            out = runner.forward(j, x, labels[j] if labels is not None and runner.is_last
                                 else None, policy=self.policies.get((s, j), "keep"))
            if out is not None and s + 1 in self.runners:
                state.local[("activation", s + 1, j)] = out
            return out
        if op.kind in ("B", "BW"):
            grad = None
            if not runner.is_last:
                grad = received if received is not None else \
                    state.local.pop(("gradient", s, j))
            grad_input = runner.backward_input(j, grad)
            if op.kind == "BW":
                runner.backward_weight(j)
            if grad_input is not None and s - 1 in self.runners:
                state.local[("gradient", s - 1, j)] = grad_input
            return grad_input
        if op.kind == "R":
            runner.recompute(j)
            return None
        if op.kind == "O":
            runner.offload(j)
            return None
        if op.kind == "L":
            runner.reload(j)
            return None
        runner.backward_weight(j)
        return None


def _describe(layout: Layout) -> str:
    shapes = ", ".join(f"{tuple(shape)}" for shape, _ in layout.metas)
    keys = f" keys {list(layout.keys)}" if layout.keys else ""
    return f"a {layout.kind}{keys} of shape(s) {shapes}"


@dataclass
class _StepState:
    """The in-flight traffic and same-rank hand-offs of one step."""

    to_send: list[tuple[Message, list[torch.Tensor]]] = field(default_factory=list)
    sending: dict[Message, tuple[list[Any], list[torch.Tensor]]] = field(default_factory=dict)
    posted: dict[Message, tuple[list[Any], list[torch.Tensor]]] = field(default_factory=dict)
    next_recv: dict[int, int] = field(default_factory=dict)
    local: dict[tuple[str, int, int], Any] = field(default_factory=dict)

    def reap(self) -> None:
        """Forget sends that completed, so their buffers are freed during the step."""
        done = [msg for msg, (works, _) in self.sending.items()
                if all(w.is_completed() for w in works)]
        for msg in done:
            del self.sending[msg]


__all__ = ["PipelineExecutor", "PipelinePeerLost", "PipelineTimeout", "ScheduleMismatch",
           "StepResult"]
