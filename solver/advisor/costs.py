"""The advisor's cost formulas: model dimensions and hardware -> per-op times and bytes.

Every figure the advisor ranks comes from these formulas plus a simulator (the activation-
passing one of DESIGN.md section 3, or WeiPipe's ring model of section 6.5), never from a
measurement. Per transformer layer (LLaMA-style: attention 4H^2 weights, gated MLP 3*H*F
with F the MLP width), for one microbatch of G sequences of S tokens:

- weights per layer ``P_l = 4H^2 + 3HF`` parameters; the vocabulary adds ``V*H`` to the
  first layer (embedding) and ``V*H`` to the last (output head);
- ``F = 2*G*S*P_l + 4*G*S^2*H`` FLOPs (matmuls, then attention scores and values);
  ``B = 2*G*S*P_l + 8*G*S^2*H`` (input gradients; attention's backward is all here);
  ``W = 2*G*S*P_l`` (weight gradients); the head adds ``2*G*S*H*V`` to each of F, B, W;
- time = FLOPs / (peak FLOP/s * mfu);
- activation memory per layer and microbatch ``act_bytes_per_token_hidden * G*S*H``
  (34 with flash attention, after Korthikanti et al.); a B leaves ``alpha`` of it for W;
- with ``recompute`` (full activation checkpointing) a layer keeps only its input,
  ``2*G*S*H`` bytes, B first re-runs the layer's forward (``B += F``), and a rank holds
  one layer's full activations at a time during the backward;
- on the wire: activations ``2*G*S*H`` bytes (bf16) per stage boundary; weights and
  gradients ``2*P_l`` bytes per layer (bf16);
- a transfer takes ``latency + bytes / bandwidth`` of the link it crosses (inside a node:
  ``intra_node_gbps``; across: ``inter_node_gbps``);
- training state ``state_bytes_per_param`` (16: bf16 weight and gradient, fp32 master
  weight and two Adam moments) per parameter a rank owns.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppsched.solver.model.errors import ProfileError
from pydantic import BaseModel, ConfigDict, Field, model_validator

GB = 1e9


class ModelDims(BaseModel):
    """The model: a stack of identical transformer layers with a vocabulary."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    layers: int = Field(description="L: transformer layers.", ge=1)
    hidden: int = Field(description="H: hidden size.", ge=1)
    heads: int = Field(description="Attention heads (must divide hidden).", ge=1)
    seq_len: int = Field(description="S: tokens per sequence.", ge=1)
    microbatch_size: int = Field(description="G: sequences per microbatch.", ge=1)
    vocab: int = Field(description="V: vocabulary size.", ge=1)
    ffn_hidden: int | None = Field(None, description="F: MLP width (default 8H/3, LLaMA).",
                                   ge=1)

    @model_validator(mode="after")
    def _check(self) -> ModelDims:
        if self.hidden % self.heads:
            raise ProfileError("model.heads", self.heads,
                               f"a divisor of hidden = {self.hidden}")
        return self

    @property
    def ffn(self) -> int:
        return self.ffn_hidden if self.ffn_hidden is not None else (8 * self.hidden) // 3

    @property
    def layer_params(self) -> float:
        return 4.0 * self.hidden ** 2 + 3.0 * self.hidden * self.ffn

    @property
    def vocab_params(self) -> float:
        return float(self.vocab * self.hidden)

    @property
    def total_params(self) -> float:
        return self.layers * self.layer_params + 2 * self.vocab_params

    @property
    def tokens(self) -> int:
        """Tokens in one microbatch."""
        return self.microbatch_size * self.seq_len


class Cluster(BaseModel):
    """The GPUs and the links between them."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    num_gpus: int = Field(description="GPUs in the job (all in one pipeline / ring).", ge=1)
    gpus_per_node: int = Field(8, description="GPUs sharing the intra-node links.", ge=1)
    gpu_tflops: float = Field(description="Peak dense bf16 TFLOP/s of one GPU.", gt=0)
    mfu: float = Field(0.5, description="Share of the peak the kernels reach.", gt=0, le=1)
    gpu_memory_gb: float = Field(description="Memory of one GPU, GB.", gt=0)
    intra_node_gbps: float = Field(description="GB/s of a link inside a node.", gt=0)
    inter_node_gbps: float = Field(description="GB/s of a link across nodes.", gt=0)
    host_link_gbps: float = Field(25.0, description="GB/s between a GPU and host memory "
                                  "(reported; no strategy here offloads).", gt=0)
    latency_us: float = Field(10.0, description="Fixed cost of one transfer, microseconds.",
                              ge=0)


@dataclass(frozen=True)
class LayerCosts:
    """One layer, one microbatch: times in seconds, sizes in bytes."""

    t_f: float
    t_b: float
    t_w: float
    head_f: float  # extra time of the output head (last layer)
    head_b: float
    head_w: float
    act_bytes: float
    full_act_bytes: float  # one layer's activations before any checkpointing
    weight_bytes: float  # bf16 weights of one layer on the wire
    boundary_bytes: float  # one microbatch's activations (or their gradient) at a boundary


def layer_costs(model: ModelDims, cluster: Cluster, act_bytes_per_token_hidden: float = 34.0,
                recompute: bool = False) -> LayerCosts:
    """The formulas of the module docstring, for one layer and one microbatch."""
    g, s, h = model.microbatch_size, model.seq_len, model.hidden
    flops_per_s = cluster.gpu_tflops * 1e12 * cluster.mfu
    mm = 2.0 * g * s * model.layer_params
    head = 2.0 * g * s * h * model.vocab / flops_per_s
    t_f = (mm + 4.0 * g * s * s * h) / flops_per_s
    full = act_bytes_per_token_hidden * g * s * h
    return LayerCosts(
        t_f=t_f,
        t_b=(mm + 8.0 * g * s * s * h) / flops_per_s + (t_f if recompute else 0.0),
        t_w=mm / flops_per_s,
        head_f=head, head_b=head, head_w=head,
        act_bytes=2.0 * g * s * h if recompute else full,
        full_act_bytes=full if recompute else 0.0,
        weight_bytes=2.0 * model.layer_params,
        boundary_bytes=2.0 * g * s * h)


def link_gbps(cluster: Cluster, src: int, dst: int) -> float:
    """Bandwidth of the link between ranks `src` and `dst` (GB/s)."""
    same = src // cluster.gpus_per_node == dst // cluster.gpus_per_node
    return cluster.intra_node_gbps if same else cluster.inter_node_gbps


def transfer_s(cluster: Cluster, num_bytes: float, gbps: float) -> float:
    """``latency + bytes / bandwidth``, seconds."""
    return cluster.latency_us * 1e-6 + num_bytes / (gbps * GB)


def ring_collective_s(cluster: Cluster, num_bytes: float) -> float:
    """An all-gather or reduce-scatter of `num_bytes` (the full tensor) over all GPUs in
    one NCCL-style ring: each link carries ``(P-1)/P`` of it, at the slowest link's speed
    (the inter-node one when the ring leaves a node), plus ``P-1`` latencies."""
    p = cluster.num_gpus
    if p == 1:
        return 0.0
    slowest = cluster.inter_node_gbps if p > cluster.gpus_per_node else cluster.intra_node_gbps
    return (p - 1) * cluster.latency_us * 1e-6 + (p - 1) / p * num_bytes / (slowest * GB)
