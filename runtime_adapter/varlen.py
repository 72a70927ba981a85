"""Microbatches of different shapes (DESIGN.md 6.2): each message carries its own shapes,
and the step follows the schedule's ``microbatch_order``.

Why shapes per message rather than a padded bucket: padding every microbatch to the
longest spends the compute the packing saved (a 32k-token microbatch beside 1k-token
ones would make every microbatch cost 32k), and it changes what attention and the loss
see unless every stage is mask-aware. A header per message costs one small int64 tensor
(10 per tensor: ndim, dtype, dims) and one extra wait per received message; the layout
(tensor count, dtypes, dict keys) is still learned once by the executor's handshake.

How: every send is preceded by its header on the same channel; a receiver posts the
header, waits for it, then posts the payload of exactly those shapes, message by message
in the sender's order (the one order point-to-point matching allows). All of a rank's
pending sends are posted before it waits on any header, so no wait stands on a send the
rank itself has not posted: a schedule that runs with fixed shapes runs with these.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
from ppsched.runtime_adapter.comm import _HEADER_LEN, decode_meta, encode_meta, posting, wait
from ppsched.runtime_adapter.executor import PipelineExecutor, StepResult, _StepState
from ppsched.runtime_adapter.plan import Message
from ppsched.runtime_adapter.values import Value
from ppsched.solver.model import Op


def microbatch_order(schedule: Any, m: int) -> list[int]:
    """The schedule's ``microbatch_order`` (input microbatch of each scheduled one), or the
    identity when it has none."""
    order = getattr(schedule, "microbatch_order", None)
    if order is None:
        return list(range(m))
    order = [int(x) for x in order]
    if sorted(order) != list(range(m)):
        raise ValueError(f"invalid 'microbatch_order': got {order}; expected a permutation "
                         f"of 0..{m - 1}")
    return order


class VariableShapeExecutor(PipelineExecutor):
    """A `PipelineExecutor` whose microbatches may differ in shape (e.g. sequence length).

    Same arguments as `PipelineExecutor`. ``run(microbatches, targets)`` takes them in
    input order (as a packing front-end lists them); the schedule's op for microbatch
    ``j`` runs input ``microbatch_order[j]``. Every microbatch must have the same layout
    (tensor count, dtypes, dict keys) and may differ in shapes.
    """

    def run(self, microbatches: Sequence[Value] | None = None,  # type: ignore[override]
            targets: Sequence[torch.Tensor] | None = None, **kwargs: Any) -> StepResult:
        """Run one step; see `PipelineExecutor.run`. The inputs are in input order."""
        m = self.schedule.profile.num_microbatches
        order = microbatch_order(self.schedule, m)
        if microbatches is not None and len(microbatches) == m:
            microbatches = [microbatches[i] for i in order]
        if targets is not None and len(targets) == m:
            targets = [targets[i] for i in order]
        # Shapes differ from microbatch to microbatch and step to step: the base class's
        # same-layout-as-the-first-step check does not apply (headers carry the shapes).
        self._input_meta = None
        return super().run(microbatches, targets, **kwargs)  # type: ignore[arg-type]

    def _post(self, state: _StepState, needed: Message | None, op: Op | None = None) -> None:
        before = (f"before op {op.kind}{op.microbatch} of stage {op.stage}" if op is not None
                  else "after its last op")
        # 1. Every pending send, each as its header then its tensors.
        ops: list[dist.P2POp] = []
        sends: list[tuple[Message, list[torch.Tensor], int]] = []
        for msg, tensors in state.to_send:
            header = [_header(tensors, self.device)] if tensors else []
            ops += [dist.P2POp(dist.isend, t, self._peer(msg.dst_rank), self.group)
                    for t in header + tensors]
            sends.append((msg, header + tensors, len(header)))
        state.to_send.clear()
        if ops:
            with posting(f"rank {self.rank} {before}, posting "
                         + ", ".join(f"the send of {msg.describe()}" for msg, _, _ in sends)):
                works = iter(dist.batch_isend_irecv(ops))
            for msg, tensors, _ in sends:
                state.sending[msg] = ([next(works) for _ in tensors], tensors)
        if needed is None or needed in state.posted:
            return
        # 2. The receives up to `needed`, in the sender's order: header, then payload.
        src, upto = self._channel_index[needed]
        channel = self.plan.recv_order[src]
        deadline = time.monotonic() + self.timeout_s
        for k in range(state.next_recv.get(src, 0), upto + 1):
            msg = channel[k]
            metas = self._recv_meta(msg)
            if not metas:
                state.posted[msg] = ([], [])
                continue
            what = (f"rank {self.rank} {before}, receiving the shapes of {msg.describe()}")
            header = torch.empty(len(metas) * _HEADER_LEN, dtype=torch.int64,
                                 device=self.device)
            with posting(what):
                work = dist.irecv(header, self._peer(src), self.group)
            wait(work, deadline, what)
            shapes = _decode(header, [dtype for _, dtype in metas], what)
            buffers = [torch.empty(shape, dtype=dtype, device=self.device)
                       for shape, (_, dtype) in zip(shapes, metas, strict=True)]
            with posting(f"rank {self.rank} {before}, posting the receive of "
                         f"{msg.describe()}"):
                works_list = [dist.irecv(b, self._peer(src), self.group) for b in buffers]
            state.posted[msg] = (works_list, buffers)
        state.next_recv[src] = upto + 1


def _header(tensors: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    return torch.cat([encode_meta(t.shape, t.dtype, device) for t in tensors])


def _decode(header: torch.Tensor, dtypes: list[torch.dtype], what: str) -> list[torch.Size]:
    shapes = []
    for k, dtype in enumerate(dtypes):
        shape, got = decode_meta(header[k * _HEADER_LEN:(k + 1) * _HEADER_LEN])
        if got != dtype:
            raise ValueError(f"{what}: tensor {k} is {got}, expected {dtype} as in the "
                             "first microbatch (every microbatch needs the same layout)")
        shapes.append(shape)
    return shapes


__all__ = ["VariableShapeExecutor", "microbatch_order"]
