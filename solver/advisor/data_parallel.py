"""FSDP, ODC and pipeline-with-packing step times for one minibatch of varied lengths.

The ODC paper (Wan, Qi, Huang et al., "Revisiting Parameter Server in LLM Post-Training",
ICLR 2026; github.com/sail-sg/odc) replaces FSDP's all-gather and reduce-scatter by
point-to-point transfers each device starts on its own ("on-demand communication").
FSDP's collectives make every device wait for the slowest before each layer's
collective; ODC's devices meet once per minibatch, before the optimizer step. With
varied sequence lengths that is the difference this module models.

Per sample of ``s`` tokens and per transformer layer the compute is that of
`solver.advisor.costs.layer_costs` with one sequence of ``s`` tokens (attention quadratic
in ``s``, matmuls linear): ``F(s)``, ``B(s)``, ``W(s)``, plus the LM head's (linear)
share on the last unit. A minibatch is ``samples_per_device`` samples per device, one
sample per microbatch (the ODC example's ``micro_batch_size 1``) or packed into
microbatches of at most ``cap`` tokens (packed samples are masked from each other, so a
microbatch costs the sum of its samples).

- **FSDP** (ZeRO-3, per-layer units plus the vocabulary unit): microbatch ``j`` runs on
  every device at once; before each unit's forward it all-gathers the unit's bf16
  weights, before its backward again, after it reduce-scatters the gradient (NCCL ring,
  `costs.ring_collective_s`). A collective ends only when every device reaches it, so
  unit ``u`` of microbatch ``j`` lasts ``max(max_d F_u(s_dj), g_u)`` forward and
  ``max(max_d (B+W)_u(s_dj), 2 g_u)`` backward with prefetch overlap (``fsdp_overlap``;
  otherwise the sum), plus one unhidden gather per microbatch. Devices must run the same
  number of microbatches; a device without a sample still joins each collective.
  Its balancing: the packing's microbatches (as ODC's), sorted by cost, round ``j``
  the ``j``-th group of ``P`` (`fsdp_rounds`); ``fsdp-arrival``: sample ``i`` to device
  ``i mod P``, filled in order (`device_microbatches`).
- **ODC**: the same bytes per unit, moved point-to-point at ``odc_efficiency`` times the
  ring's bandwidth (the primitives are not NCCL's; the efficiency is an assumption the
  advisor prints) and one latency per transfer (requests to all owners go out at once);
  a device runs its own samples back to back, so its time is its own sum of the same
  per-unit ``max(compute, transfer)``; the step is the slowest device's time plus one
  barrier (``ceil(log2 P)`` latencies). Minibatch-level balancing: the samples into
  ``P`` devices by each sample's own ODC time (the packing's Karmarkar-Karp and
  refinement), or with a cap by `solver.packing.pack_samples` (samples into devices,
  then into each device's microbatches, by compute); ``odc-arrival`` as ``fsdp-arrival``.
- **pipeline** (with packing): ``pipeline_stages`` ranks a pipeline (the layers cut
  evenly, the head on the last stage), ``P / pipeline_stages`` data-parallel replicas;
  the minibatch packed into microbatches and replicas by `solver.packing.best_packing`
  (the same cap) and each replica solved by the ZB heuristic (times scale from a
  reference microbatch of ``cap`` tokens by the layer's quadratic; the head's linear
  share scales with it);
  then each stage all-reduces its gradients across the replicas (ring, not overlapped).

Not modelled: memory (see the plain `ppsched advise` table), contention between ODC's
transfers and the devices that serve them, and the optimizer step (the same for all).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ppsched.solver.advisor.costs import (
    GB,
    Cluster,
    ModelDims,
    layer_costs,
    link_gbps,
    ring_collective_s,
    transfer_s,
)
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.profile import Profile
from ppsched.solver.packing import (
    CostModel,
    PackingError,
    PackSpec,
    Quadratic,
    best_packing,
    pack_samples,
)
from ppsched.solver.packing.partition import balanced_partition, fill_in_order

FSDP = "fsdp"
FSDP_ARRIVAL = "fsdp-arrival"
ODC = "odc"
ODC_ARRIVAL = "odc-arrival"
PIPELINE = "pipeline"
MODELS = (FSDP, ODC, PIPELINE, FSDP_ARRIVAL, ODC_ARRIVAL)


@dataclass(frozen=True)
class Assumptions:
    """What the data-parallel models assume beyond the model and the cluster (printed)."""

    samples_per_device: int = 4
    """Samples per device in one minibatch (the ODC example's ``minibatch_size 4``)."""
    cap: int | None = None
    """Most tokens in one microbatch (raised to the longest sample); None: one sample per
    microbatch for FSDP and ODC (the ODC example's ``micro_batch_size 1``), and the
    longest sample's tokens for the pipeline's packing."""
    steps: int = 8
    """Minibatches averaged over."""
    odc_efficiency: float = 0.8
    """ODC's point-to-point bandwidth as a share of the NCCL ring's (assumed, not measured)."""
    overlap: bool = True
    """Transfers hide behind the previous unit's compute (prefetch)."""
    recompute: bool = False
    """Full activation checkpointing (B re-runs F)."""
    pipeline_stages: int | None = None
    """Ranks per pipeline (None: the cluster's GPUs per node, at most its GPUs)."""

    def __post_init__(self) -> None:
        for name in ("samples_per_device", "steps", "cap"):
            value = getattr(self, name)
            if name == "cap" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ProfileError(name, value, "an integer >= 1")
        if not (math.isfinite(self.odc_efficiency) and 0 < self.odc_efficiency <= 1):
            raise ProfileError("odc_efficiency", self.odc_efficiency, "a share in (0, 1]")
        stages = self.pipeline_stages
        if stages is not None and (isinstance(stages, bool) or not isinstance(stages, int)
                                   or stages < 2):
            raise ProfileError("pipeline_stages", stages, "an integer >= 2")

    def lines(self) -> list[str]:
        packing = "one sample per microbatch" if self.cap is None else \
            f"packed into microbatches of at most {self.cap} tokens (or the longest sample)"
        return [f"samples per device per minibatch: {self.samples_per_device}, {packing}",
                f"minibatches averaged: up to {self.steps}",
                f"ODC point-to-point bandwidth: {self.odc_efficiency:g} x the NCCL ring's "
                "(assumed)",
                f"transfers overlap compute: {'yes' if self.overlap else 'no'}",
                f"recompute: {'yes' if self.recompute else 'no'}",
                f"pipeline: {self.pipeline_stages or 'GPUs per node'} stages per replica, "
                "ppsched's packing, ZB heuristic"]


@dataclass(frozen=True)
class Units:
    """Per-sample time of each FSDP unit (layers, then the vocabulary), as quadratics in
    the sample's tokens (seconds), and each unit's bf16 weight bytes."""

    f: Quadratic
    b: Quadratic
    w: Quadratic
    head: Quadratic  # the LM head's F (and, the same, its B and its W)
    layers: int
    layer_bytes: float
    vocab_bytes: float  # embedding and head, one FSDP unit

    def unit_times(self, mb: Sequence[int]) -> list[tuple[float, float]]:
        """(forward, backward incl. W) of every unit for one microbatch (its samples'
        lengths; an empty one costs nothing)."""
        layer = (self.f.of(mb), self.b.of(mb) + self.w.of(mb))
        h = self.head.of(mb)
        return [layer] * self.layers + [(h, 2 * h)]

    def compute_s(self, mb: Sequence[int]) -> float:
        """The whole model's compute for one microbatch."""
        return math.fsum(f + b for f, b in self.unit_times(mb))

    @property
    def unit_bytes(self) -> list[float]:
        return [self.layer_bytes] * self.layers + [self.vocab_bytes]


def units(model: ModelDims, cluster: Cluster, recompute: bool = False) -> Units:
    """`costs.layer_costs` read as quadratics ``a*s^2 + b*s`` in one sample's tokens.

    Its formulas are exactly such quadratics, so two lengths fix them: with ``t(1) =
    a + b`` and ``t(2) = 4a + 2b``, ``a = (t(2) - 2 t(1)) / 2``.
    """
    def at(s: int) -> tuple[float, float, float, float]:
        k = layer_costs(model.model_copy(update={"seq_len": s, "microbatch_size": 1}),
                        cluster, recompute=recompute)
        return k.t_f, k.t_b, k.t_w, k.head_f

    one, two = at(1), at(2)
    quads = []
    for t1, t2 in zip(one, two, strict=True):
        a = max(0.0, (t2 - 2 * t1) / 2)
        quads.append(Quadratic(a, t1 - a))
    f, b, w, head = quads
    return Units(f, b, w, head, layers=model.layers, layer_bytes=2.0 * model.layer_params,
                 vocab_bytes=2.0 * 2.0 * model.vocab_params)


def odc_transfer_s(cluster: Cluster, num_bytes: float, efficiency: float) -> float:
    """A device fetches (or sends) the ``(P-1)/P`` of a unit the others own, point to
    point, all requests at once: one latency, the ring's bandwidth times `efficiency`."""
    p = cluster.num_gpus
    if p == 1:
        return 0.0
    slowest = cluster.inter_node_gbps if p > cluster.gpus_per_node else cluster.intra_node_gbps
    return cluster.latency_us * 1e-6 + (p - 1) / p * num_bytes / (slowest * efficiency * GB)


def _unit_span(fwd: float, bwd: float, gather: float, overlap: bool) -> float:
    # Backward: gather the weights again and reduce-scatter the gradient (2 transfers).
    return max(fwd, gather) + max(bwd, 2 * gather) if overlap else fwd + bwd + 3 * gather


Microbatch = Sequence[int]
"""The lengths of the samples packed into one microbatch."""


def fsdp_step(u: Units, cluster: Cluster, rounds: Sequence[Sequence[Microbatch]],
              overlap: bool = True) -> float:
    """FSDP's time for `rounds` (round ``j``: each device's ``j``-th microbatch; a device
    without one in a round is left out of it, but joins its collectives)."""
    gathers = [ring_collective_s(cluster, n) for n in u.unit_bytes]
    total = 0.0
    for lengths in rounds:
        per_device = [u.unit_times(mb) for mb in lengths]
        total += gathers[0]  # the first unit's gather is never hidden
        for i, gather in enumerate(gathers):
            fwd = max(t[i][0] for t in per_device)  # the barrier: the slowest device
            bwd = max(t[i][1] for t in per_device)
            total += _unit_span(fwd, bwd, gather, overlap)
    return total


def odc_device_s(u: Units, cluster: Cluster, microbatches: Sequence[Microbatch],
                 efficiency: float, overlap: bool = True) -> float:
    """One ODC device's time for its own microbatches, back to back (no wait for others)."""
    gathers = [odc_transfer_s(cluster, n, efficiency) for n in u.unit_bytes]
    total = 0.0
    for mb in microbatches:
        total += gathers[0]
        for (fwd, bwd), gather in zip(u.unit_times(mb), gathers, strict=True):
            total += _unit_span(fwd, bwd, gather, overlap)
    return total


def odc_step(u: Units, cluster: Cluster, devices: Sequence[Sequence[Microbatch]],
             efficiency: float, overlap: bool = True) -> float:
    """ODC's time: the slowest device, then the once-per-minibatch barrier."""
    barrier = math.ceil(math.log2(cluster.num_gpus)) * cluster.latency_us * 1e-6 \
        if cluster.num_gpus > 1 else 0.0
    return max(odc_device_s(u, cluster, d, efficiency, overlap) for d in devices) + barrier


def device_microbatches(u: Units, lengths: Sequence[int], p: int, cap: int | None, *,
                        arrival: bool = False,
                        weight: Callable[[Microbatch], float] | None = None
                        ) -> list[list[list[int]]]:
    """Per device, its microbatches (each a list of sample lengths, at most `cap` tokens;
    one sample each when `cap` is None).

    Balanced, one sample per microbatch: the samples into the devices by `weight`
    (default: compute) with the packing's partition (Karmarkar-Karp, then moves and
    swaps). Balanced with a cap: the packing's assignment (`solver.packing.pack_samples`):
    samples into the devices by compute, then each device's samples into its
    microbatches the same way, as many per device as naive packing needs for
    the whole minibatch spread evenly (at least one). Arrival: sample ``i`` to device
    ``i mod p``, each device filling microbatches to the cap in that order.
    """
    if arrival:
        mine = [list(lengths[d::p]) for d in range(p)]
        if cap is None:
            return [[[s] for s in m] for m in mine]
        return [[[m[i] for i in b] for b in fill_in_order(m, cap)] if m else [] for m in mine]
    if cap is None:
        weights = [(weight or u.compute_s)([s]) for s in lengths]
        bins = balanced_partition(weights, [float(s) for s in lengths], [math.inf] * p)
        assert bins is not None, "no capacity binds, so a partition always exists"
        return [[[lengths[i]] for i in b] for b in bins]
    count = max(1, math.ceil(len(fill_in_order(lengths, cap)) / p))
    cost = CostModel(forward=u.f, backward=u.b, weight=u.w)
    groups = pack_samples(lengths, cost, cap, [count] * p)
    return [[[lengths[i] for i in mb] for mb in group] for group in groups]


def fsdp_rounds(u: Units, devices: Sequence[Sequence[Microbatch]], *,
                balanced: bool) -> list[list[Microbatch]]:
    """FSDP's rounds from the devices' microbatches. Balanced: all of them costliest
    first, in groups of ``p`` (round ``j`` runs the ``j``-th group: the sum of the groups'
    maxima is the least an assignment of equal counts reaches). Otherwise each device
    keeps its own, in its order (round ``j``: every device's ``j``-th)."""
    p = len(devices)
    if balanced:
        order = sorted((mb for d in devices for mb in d), key=u.compute_s, reverse=True)
        return [order[i:i + p] for i in range(0, len(order), p)]
    depth = max(len(d) for d in devices)
    return [[d[j] for d in devices if j < len(d)] for j in range(depth)]


@dataclass(frozen=True)
class StepResult:
    """One model's step over the minibatches: mean seconds, throughput, and a note."""

    strategy: str
    step_s: float | None
    tokens_per_s_per_gpu: float | None
    note: str = ""
    steps: list[float] = field(default_factory=list)


def pipeline_shape(cluster: Cluster, model: ModelDims, a: Assumptions) -> tuple[int, int] | str:
    """(stages, replicas) of the pipeline, or why it does not apply."""
    p = cluster.num_gpus
    stages = a.pipeline_stages or min(cluster.gpus_per_node, p)
    if stages < 2:
        return "a pipeline needs 2 or more GPUs"
    if p % stages:
        return f"{p} GPUs do not split into pipelines of {stages}"
    if model.layers % stages:
        return f"{model.layers} layers do not split into {stages} stages"
    return stages, p // stages


def pipeline_step(u: Units, model: ModelDims, cluster: Cluster, lengths: Sequence[int],
                  a: Assumptions, shape: tuple[int, int]) -> float:
    """A pipeline step with ppsched's packing, plus the replicas' gradient all-reduce."""
    stages, replicas = shape
    cap = max(a.cap or 0, max(lengths))
    per = model.layers // stages
    ms = 1e3
    last = stages - 1
    head = u.head.of([cap])

    def per_stage(q: Quadratic) -> list[float]:
        return [(per * q.of([cap]) + (head if s == last else 0.0)) * ms for s in range(stages)]

    hop = transfer_s(cluster, 2.0 * cap * model.hidden, link_gbps(cluster, 0, 1)) * ms
    act = layer_costs(model.model_copy(update={"seq_len": cap, "microbatch_size": 1}),
                      cluster, recompute=a.recompute).act_bytes
    base = Profile.model_validate(dict(
        name="advise-pipeline", num_ranks=stages, num_microbatches=1,
        t_f=per_stage(u.f), t_b=per_stage(u.b), t_w=per_stage(u.w), t_comm=hop,
        m_b=per * act / GB, m_w=0.5 * per * act / GB))
    # Microbatches per replica: at least what naive packing needs, and up to two per
    # stage when there are samples for them (fewer leave the pipeline's bubble unfilled).
    # When the samples do not pack into that many, one more microbatch each, up to one
    # sample each.
    need = math.ceil(len(fill_in_order(lengths, cap)) / replicas)
    most = math.ceil(len(lengths) / replicas)
    count = max(need, min(len(lengths) // replicas, 2 * stages))
    cost = CostModel(forward=u.f, backward=u.b, weight=u.w)
    while True:
        spec = PackSpec(lengths=tuple(lengths), cap=cap, num_replicas=replicas,
                        microbatches=(count,), reference_tokens=cap, cost=cost)
        try:
            step = best_packing(base, spec).step_time / ms
            break
        except PackingError:
            if count >= most:
                raise
            count += 1
    if replicas > 1:
        # Each stage's gradients (its layers, plus the vocabulary on the end stages)
        # all-reduced across the replicas: reduce-scatter and all-gather of a ring.
        grad = per * u.layer_bytes + u.vocab_bytes / 2
        slowest = cluster.inter_node_gbps
        step += 2 * ((replicas - 1) * cluster.latency_us * 1e-6
                     + (replicas - 1) / replicas * grad / (slowest * GB))
    return step


def compare(model: ModelDims, cluster: Cluster, batches: Sequence[Sequence[int]],
            a: Assumptions, strategies: Sequence[str] = MODELS) -> list[StepResult]:
    """Every requested model's mean step over `batches` (each a minibatch of lengths)."""
    u = units(model, cluster, a.recompute)
    p = cluster.num_gpus
    tokens = math.fsum(sum(b) for b in batches) / len(batches)
    shape = pipeline_shape(cluster, model, a)
    out = []
    for name in strategies:
        if name == PIPELINE and isinstance(shape, str):
            out.append(StepResult(name, None, None, shape))
            continue
        times = []
        for lengths in batches:
            cap = None if a.cap is None else max(a.cap, max(lengths))
            arrival = name in (FSDP_ARRIVAL, ODC_ARRIVAL)
            # ODC balances by each sample's own time, transfers included: a short sample
            # still pays its transfers in full when they outlast its compute.
            devices = device_microbatches(
                u, lengths, p, cap, arrival=arrival, weight=None if name in (
                    FSDP, FSDP_ARRIVAL) else lambda mb: odc_device_s(
                    u, cluster, [mb], a.odc_efficiency, a.overlap))
            if name in (FSDP, FSDP_ARRIVAL):
                times.append(fsdp_step(u, cluster, fsdp_rounds(u, devices, balanced=not arrival),
                                       a.overlap))
            elif name in (ODC, ODC_ARRIVAL):
                times.append(odc_step(u, cluster, devices, a.odc_efficiency, a.overlap))
            elif name == PIPELINE:
                assert not isinstance(shape, str)
                times.append(pipeline_step(u, model, cluster, lengths, a, shape))
            else:
                raise ProfileError("strategy", name, "one of " + ", ".join(MODELS))
        mean = math.fsum(times) / len(times)
        note = f"{shape[0]} stages x {shape[1]} replicas" \
            if name == PIPELINE and not isinstance(shape, str) else ""
        out.append(StepResult(name, mean, tokens / mean / p, note, times))
    return sorted(out, key=lambda r: (r.step_s is None, r.step_s or 0.0))

