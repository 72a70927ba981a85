"""A small GPT with tied embeddings, cut into pipeline stages (tests, benchmarks, profiling).

nanoGPT's shape: token and position embeddings, pre-LayerNorm blocks (causal
self-attention, GELU MLP), a final LayerNorm and a head that reuses the token embedding's
weight (``logits = x @ E^T``). The tie is one ``nn.Parameter`` object held by the first
stage (`Embed`) and the last (`Head`): on one rank (the V placement puts both stages on
rank 0) it stays one object, so autograd accumulates both uses; on two ranks each holds a
copy and the copies' gradients must be summed over the ranks holding them (`tied_stages`
names those stages).

Usage::

    model = gpt_model(GPTConfig(), seed=0)            # the unpipelined reference
    stages = split_stages(model, num_stages)           # share the model's parameters
    mine = copy.deepcopy({s: stages[s] for s in my_stages})  # one deepcopy: ties kept
    tokens, targets = gpt_batch(GPTConfig(), num_microbatches, microbatch_size=2)
    loss = gpt_loss(stages[-1](...), targets[j])

Every stage is an ``nn.Sequential``: stage 0 takes int64 tokens ``[batch, seq]``, the
others take and give ``[batch, seq, dim]`` activations; the last gives logits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True, kw_only=True)
class GPTConfig:
    """The model's sizes (defaults: tiny, for tests on a loaded CPU)."""

    vocab: int = 64
    """Vocabulary size (rows of the tied embedding)."""
    seq: int = 8
    """Sequence length (rows of the position embedding)."""
    dim: int = 16
    """Model width."""
    heads: int = 2
    """Attention heads; must divide `dim`."""
    layers: int = 4
    """Transformer blocks, spread over the stages."""
    ffn_mult: int = 4
    """MLP width as a multiple of `dim`."""

    def __post_init__(self) -> None:
        for name in ("vocab", "seq", "dim", "heads", "layers", "ffn_mult"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"invalid '{name}': got {value!r}; expected an integer >= 1")
        if self.dim % self.heads:
            raise ValueError(f"invalid 'heads': got {self.heads}; expected a divisor of "
                             f"dim = {self.dim}")


class Embed(nn.Module):
    """Token embedding (the tied weight) plus a learned position embedding."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.tok = nn.Embedding(config.vocab, config.dim)
        self.pos = nn.Embedding(config.seq, config.dim)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[-1], device=tokens.device)
        return self.tok(tokens) + self.pos(positions)


class Attention(nn.Module):
    """Causal multi-head self-attention: one qkv Linear and an output Linear."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.qkv = nn.Linear(config.dim, 3 * config.dim)
        self.proj = nn.Linear(config.dim, config.dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for y in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(config.dim)
        self.attn = Attention(config)
        self.ln2 = nn.LayerNorm(config.dim)
        self.up = nn.Linear(config.dim, config.ffn_mult * config.dim)
        self.down = nn.Linear(config.ffn_mult * config.dim, config.dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Head(nn.Module):
    """Final LayerNorm and the tied output projection (``F.linear`` with the embedding)."""

    def __init__(self, config: GPTConfig, tied: nn.Parameter) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(config.dim)
        self.weight = tied  # the same Parameter object as Embed.tok.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(self.ln(x), self.weight)


class GPT(nn.Module):
    """The unpipelined model: ``logits = head(blocks(embed(tokens)))``."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = Embed(config)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.head = Head(config, self.embed.tok.weight)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def gpt_model(config: GPTConfig, *, seed: int = 0) -> GPT:
    """The model with weights drawn from `seed` (the same seed gives the same weights)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT(config)
        # GPT-2's initialisation, scaled so that tiny models still train sensibly.
        for name, p in model.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02 if "down" not in name and "proj" not in name
                                else 0.02 / math.sqrt(2 * config.layers))
    return model


def layers_per_stage(num_layers: int, num_stages: int) -> list[int]:
    """Blocks per stage: as even as possible, extra blocks to the earlier stages."""
    if num_stages < 1:
        raise ValueError(f"invalid 'num_stages': got {num_stages}; expected an integer >= 1")
    if num_stages > 2 and num_layers < num_stages - 2:
        raise ValueError(f"invalid 'layers': got {num_layers}; expected at least "
                         f"num_stages - 2 = {num_stages - 2} so that every middle stage "
                         "has a block")
    if num_layers >= num_stages:
        return [num_layers // num_stages + (1 if k < num_layers % num_stages else 0)
                for k in range(num_stages)]
    # Fewer blocks than stages: one per middle stage (the first and last hold the
    # embedding and the head), the rest to the first stage, then the last.
    counts = [0] + [1] * (num_stages - 2) + [0] if num_stages > 1 else [num_layers]
    rest = num_layers - (num_stages - 2) if num_stages > 1 else 0
    counts[0] += (rest + 1) // 2 if rest > 0 else 0
    counts[-1] += rest // 2 if rest > 0 else 0
    return counts


def split_stages(model: GPT, num_stages: int) -> list[nn.Sequential]:
    """The model's stages in model order; they share the model's parameter objects.

    Stage 0 is ``Embed`` plus its blocks, the last stage its blocks plus ``Head``; the
    tied weight is in both. Deep-copy a rank's stages in one ``copy.deepcopy`` call so
    that a tie between two stages of one rank stays one parameter.
    """
    counts = layers_per_stage(len(model.blocks), num_stages)
    stages: list[nn.Sequential] = []
    start = 0
    for k, count in enumerate(counts):
        parts: list[nn.Module] = [model.embed] if k == 0 else []
        parts += list(model.blocks[start:start + count])
        start += count
        if k == num_stages - 1:
            parts.append(model.head)
        stages.append(nn.Sequential(*parts))
    return stages


def tied_stages(num_stages: int) -> tuple[int, ...]:
    """The stages holding the tied embedding weight (first and last)."""
    return (0,) if num_stages == 1 else (0, num_stages - 1)


def tied_parameters(stages: Mapping[int, nn.Module]) -> list[nn.Parameter]:
    """The tied embedding weight(s) among `stages`, each distinct object once."""
    found: dict[int, nn.Parameter] = {}
    for module in stages.values():
        for sub in module.modules():
            if isinstance(sub, Embed):
                found.setdefault(id(sub.tok.weight), sub.tok.weight)
            elif isinstance(sub, Head):
                found.setdefault(id(sub.weight), sub.weight)
    return list(found.values())


def gpt_batch(config: GPTConfig, num_microbatches: int, *, microbatch_size: int = 2,
              seed: int = 1) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Token inputs and next-token targets of one step: `num_microbatches` of each."""
    g = torch.Generator().manual_seed(seed)
    data = [torch.randint(0, config.vocab, (microbatch_size, config.seq + 1), generator=g)
            for _ in range(num_microbatches)]
    return [d[:, :-1].contiguous() for d in data], [d[:, 1:].contiguous() for d in data]


def gpt_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of one microbatch (computed in fp32)."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))
