"""The profiler: measure a model's stages and write a profile the solver accepts as is.

``t_f``, ``t_b`` and ``t_w`` are measured with the executor's own B/W split (a
`StageRunner` per stage), in ms: CUDA events on GPU, the wall clock on CPU; each is the
median over `iters` rounds after `warmup`. Memory, in MiB, is counted as bytes of tensors,
the same way on every device: ``m_b`` is what autograd saves during F (distinct storages,
parameters excluded), ``m_w`` what the split keeps from B for W, as measured (it may
exceed ``m_b``: see DESIGN.md 6.1). That is exact for the
tensors themselves and leaves out allocator rounding, caches and workspaces. ``t_comm`` is
half the round trip of one activation between ranks 0 and 1 (needs two processes).

With ``policies`` (``--policies``) it also measures what the activation policies need
(DESIGN.md 6.3), with the executor's own R, O and L (`StageRunner`): ``t_r`` the
recompute before B, ``m_ckpt`` the input a recomputed F keeps, ``t_offload`` and
``t_reload`` the copies of what autograd saved to host memory and back, and ``m_keep``
what stays on the device meanwhile (the stage's input, which F's caller holds); the
bytes copied are written in the description.

A library: `profile_stages` measures stages in one process; `profile_ranks.profile_model`
measures each rank's own stages in its process; `profile_cli` is the command line
(``python -m ppsched.runtime_adapter.profile_cli``) over both.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from ppsched.runtime_adapter.stage import LossFn, StageRunner
from ppsched.runtime_adapter.values import flatten
from ppsched.solver.model import parse_profile
from torch import nn

log = logging.getLogger(__name__)
MIB = 2**20


class Timer:
    """Wall clock on CPU; CUDA events (read after a synchronize) on GPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def time_ms(self, fn: Callable[[], Any]) -> tuple[float, Any]:
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                enable_timing=True)
            start.record()
            value = fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end), value
        t0 = time.perf_counter()
        value = fn()
        return (time.perf_counter() - t0) * 1e3, value


def saved_bytes(module: nn.Module, fn: Callable[[], Any]) -> tuple[int, Any]:
    """Run `fn`, counting the bytes of distinct non-parameter storages autograd saves."""
    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        value = fn()
    return sum(storages.values()), value


def profile_stages(stages: Sequence[nn.Module], example_input: torch.Tensor, loss_fn: LossFn,
                   target: torch.Tensor, *, num_ranks: int, num_microbatches: int,
                   num_chunks: int = 1, placement: str | None = None, t_comm: float = 0.0,
                   memory_limit: float | None = None, warmup: int = 2, iters: int = 5,
                   name: str | None = None, policies: bool = False) -> dict[str, Any]:
    """Measure every stage on this process's device and return a profile JSON object.

    Args:
        stages: the model's ``num_ranks * num_chunks`` stages in model order (their Linears
            become `SplitLinear` in place, as the executor makes them).
        example_input: one microbatch of the first stage's input.
        loss_fn: ``loss_fn(output, target)``, applied after the last stage.
        target: one microbatch's target.
        num_ranks, num_microbatches, num_chunks, placement, memory_limit: echoed into the
            profile (DESIGN.md section 2).
        t_comm: the latency to write (see `measure_t_comm`), ms.
        warmup, iters: untimed and timed rounds; each figure is the median of `iters`.
        policies: also measure ``t_r``, ``m_ckpt``, ``t_offload``, ``t_reload`` and
            ``m_keep`` (see the module docstring).

    Raises:
        ValueError: the number of stages is not ``num_ranks * num_chunks``, or a count < 1.
        ProfileError: the measured profile is not acceptable (the field is named).
    """
    num_stages = num_ranks * num_chunks
    if len(stages) != num_stages:
        raise ValueError(f"invalid 'stages': got {len(stages)} modules; expected num_ranks * "
                         f"num_chunks = {num_stages}")
    if iters < 1 or warmup < 0:
        raise ValueError(f"invalid 'iters'/'warmup': got {iters}/{warmup}; expected iters >= 1 "
                         "and warmup >= 0")
    device = example_input.device
    timer = Timer(device)
    runners = [StageRunner(s, module, is_last=s == num_stages - 1, loss_fn=loss_fn,
                           num_microbatches=1) for s, module in enumerate(stages)]
    times: dict[str, list[list[float]]] = {k: [[] for _ in range(num_stages)]
                                           for k in ("F", "B", "W")}
    m_b = [0] * num_stages
    m_w = [0] * num_stages
    for round_ in range(warmup + iters):
        timed = round_ >= warmup
        x: torch.Tensor | None = example_input
        for s, runner in enumerate(runners):
            assert x is not None, "only the last stage returns no output"
            inp = x
            t, (nbytes, x) = timer.time_ms(lambda r=runner, i=inp: saved_bytes(
                r.module, lambda: r.forward(0, i, target)))
            m_b[s] = nbytes
            if timed:
                times["F"][s].append(t)
        grad: torch.Tensor | None = None
        for s in reversed(range(num_stages)):
            runner = runners[s]
            t, grad = timer.time_ms(lambda r=runner, g=grad: r.backward_input(0, g))
            m_w[s] = runner.deferred_bytes(0)
            if timed:
                times["B"][s].append(t)
        for s, runner in enumerate(runners):
            t, _ = timer.time_ms(lambda r=runner: r.backward_weight(0))
            if timed:
                times["W"][s].append(t)
    measured = _measure_policies(runners, example_input, target, timer, warmup, iters) \
        if policies else None
    for module in stages:
        module.zero_grad(set_to_none=True)
    profile = build_profile(
        t_f=[statistics.median(v) for v in times["F"]],
        t_b=[statistics.median(v) for v in times["B"]],
        t_w=[statistics.median(v) for v in times["W"]], m_b_bytes=m_b, m_w_bytes=m_w,
        num_ranks=num_ranks, num_microbatches=num_microbatches, num_chunks=num_chunks,
        placement=placement, t_comm=t_comm, memory_limit=memory_limit, iters=iters,
        device=device, name=name)
    if measured is not None:
        copied = measured.pop("bytes")
        profile.update(measured)
        profile["description"] += (
            "; policies measured with the executor's R, O and L (copies to host memory: "
            + ", ".join(f"{b / MIB:.3g}" for b in copied) + " MiB per stage)")
    parse_profile(profile)  # the solver must accept it as is
    return profile


def build_profile(*, t_f: Sequence[float], t_b: Sequence[float], t_w: Sequence[float],
                  m_b_bytes: Sequence[int], m_w_bytes: Sequence[int], num_ranks: int,
                  num_microbatches: int, num_chunks: int, placement: str | None,
                  t_comm: float | list[float], memory_limit: float | None, iters: int,
                  device: torch.device, name: str | None, how: str = "",
                  t_op: float | None = None) -> dict[str, Any]:
    """The profile JSON object of per-stage medians (ms) and bytes, validated.

    Args:
        how: words added to the description after "measured by runtime_adapter.profiler"
            (e.g. "on 2 ranks, each its own stages").
        t_op: the executor's per-op overhead in ms (`runtime_adapter.op_overhead`), when
            measured on the ranks.
    """
    num_stages = len(t_f)
    m_b, m_w = list(m_b_bytes), list(m_w_bytes)
    # m_w is written as measured, never clamped to m_b (DESIGN.md 6.1 allows m_w > m_b):
    # an embedding or a head's dense weight gradient is made in B and held until W, which
    # can be many times what F saved. Such stages are named in the description.
    heavy = [s for s in range(num_stages) if m_w[s] > m_b[s]]
    for s in heavy:
        log.info("stage %d: the W stash (%d B) exceeds what F saved (%d B)", s, m_w[s], m_b[s])
    note = "" if not heavy else (
        "; W holds more than F on stage(s) " + ", ".join(
            f"{s} ({m_w[s] / MIB:.3g} vs {m_b[s] / MIB:.3g} MiB)" for s in heavy)
        + ": a weight gradient made in B and held until W (e.g. an embedding or a head)")
    profile: dict[str, Any] = {
        "name": name or f"measured-p{num_ranks}-v{num_chunks}-m{num_microbatches}",
        "description": f"measured by ppsched.runtime_adapter.profiler{how} on {device.type}: times "
                       f"in ms (median of {iters}), memory in MiB (bytes of saved tensors)"
                       f"{note}",
        "num_ranks": num_ranks, "num_microbatches": num_microbatches,
        "num_chunks": num_chunks,
        "t_f": [_r(x) for x in t_f], "t_b": [_r(x) for x in t_b],
        "t_w": [_r(x) for x in t_w],
        "t_comm": [_r(x) for x in t_comm] if isinstance(t_comm, list) else _r(t_comm),
        "m_b": [_r(b / MIB) for b in m_b], "m_w": [_r(w / MIB) for w in m_w],
        "memory_limit": memory_limit,
    }
    if num_chunks > 1:
        profile["placement"] = placement
    if t_op is not None:
        profile["t_op"] = _r(t_op)
        profile["description"] += (f"; t_op: the executor's own time per op, {_r(t_op)} ms, "
                                   "from a recorded step on the ranks")
    parse_profile(profile)  # the solver must accept it as is
    return profile


def _measure_policies(runners: Sequence[StageRunner], example_input: torch.Tensor,
                      target: torch.Tensor, timer: Timer, warmup: int, iters: int,
                      ) -> dict[str, Any]:
    """Per stage: the medians of R's, O's and L's times (ms), the bytes a recomputed F
    keeps and an offloaded one leaves on the device (MiB), and the bytes O copies.

    Each stage runs on its own input from a plain forward pass; B gets a gradient of
    ones (its value does not change the times), and W runs to leave nothing held.
    """
    num_stages = len(runners)
    inputs: list[torch.Tensor] = []
    x: Any = example_input
    for runner in runners:
        inputs.append(x)
        out = runner.forward(0, x, target if runner.is_last else None)
        _finish(runner, out)
        x = out
    times: dict[str, list[list[float]]] = {k: [[] for _ in range(num_stages)]
                                           for k in ("R", "O", "L")}
    copied = [0] * num_stages
    for round_ in range(warmup + iters):
        timed = round_ >= warmup
        for s, runner in enumerate(runners):
            goal = target if runner.is_last else None
            out = runner.forward(0, inputs[s], goal, policy="recompute")
            t_r, _ = timer.time_ms(lambda r=runner: r.recompute(0))
            _finish(runner, out)
            out = runner.forward(0, inputs[s], goal, policy="offload")
            copied[s] = runner.offloaded_bytes(0)
            t_o, _ = timer.time_ms(lambda r=runner: r.offload(0))
            t_l, _ = timer.time_ms(lambda r=runner: r.reload(0))
            _finish(runner, out)
            if timed:
                times["R"][s].append(t_r)
                times["O"][s].append(t_o)
                times["L"][s].append(t_l)
    kept = [_r(sum(t.untyped_storage().nbytes() for t in _tensors(x) if t.is_floating_point())
               / MIB) for x in inputs]
    return {"t_r": [_r(statistics.median(v)) for v in times["R"]], "m_ckpt": kept,
            "t_offload": [_r(statistics.median(v)) for v in times["O"]],
            "t_reload": [_r(statistics.median(v)) for v in times["L"]], "m_keep": kept,
            "bytes": copied}


def _finish(runner: StageRunner, out: Any) -> None:
    """B (with a gradient of ones) and W of microbatch 0, so the runner holds nothing."""
    grad = None if runner.is_last else torch.ones_like(out)
    runner.backward_input(0, grad)
    runner.backward_weight(0)


def _tensors(x: Any) -> list[torch.Tensor]:
    return flatten(x, "input")[1]


def measure_t_comm(shape: Sequence[int], dtype: torch.dtype = torch.float32, *,
                   device: torch.device | None = None, iters: int = 20,
                   group: dist.ProcessGroup | None = None) -> float:
    """Half the median round trip (ms) of one tensor between ranks 0 and 1 (a collective:
    every rank of `group` calls it; ranks other than 0 and 1 return at once)."""
    rank = dist.get_rank(group)
    buffer = torch.zeros(tuple(shape), dtype=dtype, device=device)
    rtts: list[float] = []
    for i in range(iters + 2):
        if rank == 0:
            t0 = time.perf_counter()
            dist.send(buffer, 1, group)
            dist.recv(buffer, 1, group)
            if i >= 2:
                rtts.append((time.perf_counter() - t0) * 1e3)
        elif rank == 1:
            dist.recv(buffer, 0, group)
            dist.send(buffer, 0, group)
    value = torch.tensor([statistics.median(rtts) / 2 if rtts else 0.0], dtype=torch.float64)
    dist.broadcast(value, 0, group)
    return float(value.item())


def _r(x: float) -> float:
    return round(x, 6)
