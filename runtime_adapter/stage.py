"""One pipeline stage on this rank: its F, B and W of a microbatch, and what each holds.

Memory follows the cost model (DESIGN.md section 3): F keeps its autograd graph (``m_b``);
B computes the input gradient, frees the graph and keeps only what W needs (``m_w``:
the Linear inputs and output gradients, and fallback gradients); W frees the rest.

Activation policies (DESIGN.md 6.3): an F whose activation is recomputed runs without a
graph and keeps only its input (and the RNG state, so dropout draws the same mask); R
runs it again with the graph before B. An F whose activation is offloaded keeps its
graph, but every tensor autograd saves goes through a `HostCopy` (saved-tensor hooks):
O moves them to host memory, L brings them back before B. The copies here are
synchronous; overlapping them with compute on copy streams is the GPU's matter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from ppsched.runtime_adapter.copy_lane import CopyLanes, Pending
from ppsched.runtime_adapter.values import Layout, Value, call, flatten, unflatten
from ppsched.runtime_adapter.weight_grad import (
    Deferred,
    WeightGradStore,
    apply_weight_grads,
    split_linears,
)
from torch import nn

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


Policy = Literal["keep", "recompute", "offload"]


@dataclass
class _Checkpoint:
    """What a recomputed F keeps until R: its input, target and RNG state."""

    layout: Layout
    tensors: list[torch.Tensor]
    target: torch.Tensor | None
    cpu_rng: torch.Tensor
    cuda_rng: torch.Tensor | None


class HostCopy:
    """A tensor autograd saved during an offloaded F: on its device until O, on the host
    from O to L, back on its device from L on. O and L run on the rank's copy lanes
    (`runtime_adapter.copy_lane`); reading the tensor (B's unpack) waits for L only."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self._tensor: torch.Tensor | None = tensor
        self._host: Pending | None = None  # from O until L
        self._back: Pending | None = None  # from L until read
        self.nbytes = tensor.untyped_storage().nbytes()

    def to_host(self, lanes: CopyLanes) -> None:
        assert self._tensor is not None, "O of a tensor already offloaded"
        self._host = lanes.to_host(self._tensor)
        self._tensor = None  # the device memory goes once the copy has read it

    def to_device(self, lanes: CopyLanes) -> None:
        assert self._host is not None, "L of a tensor never offloaded"
        self._back = lanes.to_device(self._host)
        self._host = None

    @property
    def tensor(self) -> torch.Tensor:
        """The saved tensor: on the device before O and after L (waiting for L's copy),
        on the host in between."""
        if self._back is not None:
            self._tensor = self._back.result()
            self._back = None
        if self._host is not None:
            return self._host.result()
        assert self._tensor is not None
        return self._tensor


@dataclass
class _Forward:
    """What F holds until B: the floating-point input leaves and the outputs that carry a
    gradient (or the scaled loss) with their graph."""

    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor | None]  # per floating-point output; None: no graph
    single: bool  # the input was one tensor: B returns one gradient, not a list


class StageRunner:
    """Runs F, B and W of one stage, one microbatch at a time, in any valid order.

    Args:
        stage: the global stage index.
        module: the stage's module (its Linears are made `SplitLinear` in place).
        is_last: the last stage applies `loss_fn` to its output.
        loss_fn: ``loss_fn(output, target)`` of one microbatch.
        num_microbatches: the step's loss is the mean of the microbatches' losses, so each
            microbatch's loss is divided by it before its backward.
        autocast_dtype: run F (and the loss) under ``torch.autocast`` with this dtype.
        lanes: the rank's copy lanes for O and L (shared by its stages); made for this
            runner at its first O when not given.
    """

    def __init__(self, stage: int, module: nn.Module, *, is_last: bool, loss_fn: LossFn,
                 num_microbatches: int, autocast_dtype: torch.dtype | None = None,
                 lanes: CopyLanes | None = None) -> None:
        self.stage = stage
        self.module = module
        self.is_last = is_last
        self.loss_fn = loss_fn
        self.num_microbatches = num_microbatches
        self.autocast_dtype = autocast_dtype
        self.loss_scale = 1.0  # a grad scaler's factor, set by the executor per step
        self.store = WeightGradStore()
        self.fallback_params = split_linears(module, self.store)
        fallback = {id(p) for p in self.fallback_params}
        self.linear_params = [p for p in module.parameters()
                              if p.requires_grad and id(p) not in fallback]
        self._forward: dict[int, _Forward] = {}
        self._deferred: dict[int, Deferred] = {}
        self._checkpoints: dict[int, _Checkpoint] = {}  # recomputed F, until R
        self._offloaded: dict[int, list[HostCopy]] = {}  # offloaded F, until B
        self.lanes: CopyLanes | None = lanes  # O and L copies; made at the first O if None
        self.losses: dict[int, torch.Tensor] = {}

    def autocast(self) -> torch.autocast:
        """The autocast context of F (disabled when no dtype was given)."""
        device = next((p.device.type for p in self.module.parameters()), "cpu")
        return torch.autocast(device, dtype=self.autocast_dtype,
                              enabled=self.autocast_dtype is not None)

    def held(self) -> tuple[int, int]:
        """Microbatches between F and B (an R pending included), and between B and W (for
        leak checks)."""
        return len(self._forward) + len(self._checkpoints), len(self._deferred)

    def deferred_bytes(self, microbatch: int) -> int:
        """Bytes a B of `microbatch` holds for its W (0 when none is pending)."""
        deferred = self._deferred.get(microbatch)
        return deferred.nbytes() if deferred is not None else 0

    def offloaded_bytes(self, microbatch: int) -> int:
        """Bytes an offloaded F of `microbatch` saved for O to copy (0 when none is held)."""
        return sum(box.nbytes for box in self._offloaded.get(microbatch, ()))

    def forward(self, microbatch: int, x: Value, target: torch.Tensor | None = None,
                policy: Policy = "keep") -> Value | None:
        """F: run the stage; return its output, detached, for the next stage (None if last).

        `x` is a tensor, a tuple (positional arguments) or a dict (keyword arguments).
        `policy`: what happens to the activation until B (see the module docstring).
        """
        if microbatch in self._forward or microbatch in self._checkpoints:
            raise RuntimeError(f"F of stage {self.stage} microbatch {microbatch} ran twice")
        if self.is_last and target is None:
            raise ValueError(f"invalid 'targets': got None for microbatch {microbatch}; "
                             "expected a target tensor on the rank of the last stage")
        layout, tensors = flatten(x, f"input of stage {self.stage}")
        if policy == "recompute":
            device = next((p.device for p in self.module.parameters()), torch.device("cpu"))
            self._checkpoints[microbatch] = _Checkpoint(
                layout, [t.detach() for t in tensors], target, torch.get_rng_state(),
                torch.cuda.get_rng_state(device) if device.type == "cuda" else None)
            with torch.no_grad():
                output = self._run(microbatch, layout, tensors, target)
            del self._forward[microbatch]  # no graph: R builds it again
            return output
        if policy == "offload":
            saved: list[HostCopy] = []
            keep = {id(p) for p in self.module.parameters()}

            def pack(t: torch.Tensor) -> torch.Tensor | HostCopy:
                # Parameters and the stage's input (the leaves `_run` makes, which F's
                # record holds for B: m_keep) stay put; copying them would free nothing.
                if id(t) in keep or isinstance(t, nn.Parameter) or \
                        (t.is_leaf and t.requires_grad):
                    return t
                box = HostCopy(t)
                saved.append(box)
                return box

            def unpack(x: torch.Tensor | HostCopy) -> torch.Tensor:
                return x.tensor if isinstance(x, HostCopy) else x

            with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
                output = self._run(microbatch, layout, tensors, target)
            self._offloaded[microbatch] = saved
            return output
        return self._run(microbatch, layout, tensors, target)

    def _run(self, microbatch: int, layout: Layout, tensors: list[torch.Tensor],
             target: torch.Tensor | None) -> Value | None:
        """The stage's forward of one microbatch, its graph kept for B in `_forward`."""
        # Leaves of their own, so that B can ask autograd for exactly these gradients.
        tensors = [t.detach().requires_grad_(True) if t.is_floating_point() else t
                   for t in tensors]
        leaves = [t for t in tensors if t.is_floating_point()]
        with self.autocast():
            output = call(self.module, unflatten(layout, tensors))
            if self.is_last:
                assert target is not None
                if not isinstance(output, torch.Tensor):
                    raise ValueError(f"invalid output of the last stage {self.stage}: got "
                                     f"{type(output).__name__}; expected one tensor for "
                                     "loss_fn(output, target)")
                loss = self.loss_fn(output, target)
        if self.is_last:
            # The loss stays a tensor (no .item()): on CUDA reading it would block the host.
            self.losses[microbatch] = loss.detach()
            self._forward[microbatch] = _Forward(
                leaves, [loss * (self.loss_scale / self.num_microbatches)],
                layout.kind == "tensor")
            return None
        out_layout, outs = flatten(output, f"output of stage {self.stage}")
        self._forward[microbatch] = _Forward(
            leaves, [t if t.requires_grad else None for t in outs if t.is_floating_point()],
            layout.kind == "tensor")
        return unflatten(out_layout, [t.detach() for t in outs])

    def recompute(self, microbatch: int) -> None:
        """R: run a recomputed F again, with its graph, from its input and RNG state."""
        checkpoint = self._checkpoints.pop(microbatch, None)
        if checkpoint is None:
            raise RuntimeError(f"R of stage {self.stage} microbatch {microbatch} without a "
                               "recomputed F before it")
        cuda = checkpoint.cuda_rng is not None
        device = next((p.device for p in self.module.parameters()), torch.device("cpu"))
        with torch.random.fork_rng(devices=[device] if cuda else []):
            torch.set_rng_state(checkpoint.cpu_rng)
            if checkpoint.cuda_rng is not None:
                torch.cuda.set_rng_state(checkpoint.cuda_rng, device)
            self._run(microbatch, checkpoint.layout, checkpoint.tensors, checkpoint.target)

    def offload(self, microbatch: int) -> None:
        """O: the activation autograd saved for an offloaded F, to host memory."""
        for box in self._saved(microbatch, "O"):
            box.to_host(self._lanes())

    def reload(self, microbatch: int) -> None:
        """L: the offloaded activation back on its device, for B."""
        for box in self._saved(microbatch, "L"):
            box.to_device(self._lanes())

    def _lanes(self) -> CopyLanes:
        """The copy lanes of this runner (made at its first O)."""
        if self.lanes is None:
            device = next((p.device for p in self.module.parameters()), torch.device("cpu"))
            self.lanes = CopyLanes(device)
        return self.lanes

    def _saved(self, microbatch: int, kind: str) -> list[HostCopy]:
        saved = self._offloaded.get(microbatch)
        if saved is None:
            raise RuntimeError(f"{kind} of stage {self.stage} microbatch {microbatch} without "
                               "an offloaded F before it")
        return saved

    def backward_input(self, microbatch: int,
                       grad_output: Sequence[torch.Tensor] | torch.Tensor | None,
                       ) -> torch.Tensor | list[torch.Tensor] | None:
        """B: the input's gradient (None on the first stage), one tensor for a tensor
        input, else a list, one per floating-point input tensor; W's share is deferred.
        `grad_output`: a tensor, or a sequence with one per floating-point output."""
        held = self._forward.pop(microbatch, None)
        if held is None:
            raise RuntimeError(f"B of stage {self.stage} microbatch {microbatch} before its F"
                               + (" (or its R)" if microbatch in self._checkpoints else ""))
        self._offloaded.pop(microbatch, None)  # its graph is freed by this B
        if not self.is_last and grad_output is None:
            raise RuntimeError(f"B of stage {self.stage} microbatch {microbatch} without the "
                               "gradient of its output")
        grads_out: list[torch.Tensor | None]
        if grad_output is None:
            grads_out = [None]
        elif isinstance(grad_output, torch.Tensor):
            grads_out = [grad_output]
        else:
            grads_out = list(grad_output)
        pairs = [(o, g) for o, g in zip(held.outputs, grads_out, strict=True) if o is not None]
        wants_input = self.stage > 0
        inputs: list[torch.Tensor] = list(held.inputs) if wants_input else []
        # The Linears' weights are asked for too, so that autograd runs their backward even
        # on the first stage (whose input needs no gradient); their Function returns None
        # for them and queues the weight product instead.
        inputs += self.fallback_params + self.linear_params
        deferred = self.store.begin()
        try:
            if inputs and pairs:
                grads = torch.autograd.grad([o for o, _ in pairs], inputs,
                                            grad_outputs=[g for _, g in pairs],
                                            allow_unused=True)
            else:
                grads = (None,) * len(inputs)
        finally:
            self.store.end()
        offset = len(held.inputs) if wants_input else 0
        # Fallback parameters' gradients, and those autograd returns for a split Linear's
        # parameter through another use (a tie, an F.linear): its own Function gave None.
        for param, grad in zip(self.fallback_params + self.linear_params, grads[offset:],
                               strict=True):
            if grad is not None:
                deferred.fallback.append((param, grad))
        self._deferred[microbatch] = deferred
        if not wants_input:
            return None
        # An input the stage did not use still gets a gradient: zeros, so the sender's
        # message has every tensor it expects.
        result = [g if g is not None else torch.zeros_like(x)
                  for g, x in zip(grads[:offset], held.inputs, strict=True)]
        if held.single:
            return result[0] if result else None
        return result

    def backward_weight(self, microbatch: int) -> None:
        """W: the weight gradients B deferred, added to ``.grad``."""
        deferred = self._deferred.pop(microbatch, None)
        if deferred is None:
            raise RuntimeError(f"W of stage {self.stage} microbatch {microbatch} before its B")
        apply_weight_grads(deferred)
