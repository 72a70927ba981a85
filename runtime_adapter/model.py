"""The built-in example: a residual MLP cut into pipeline stages, and its data.

Small enough for tests (fp32 on CPU), large enough for benchmarks (``hidden`` and
``layers_per_stage`` scale the compute). Every stage has a LayerNorm, so the autograd
fallback of the B/W split is exercised alongside the split Linears.
"""

from __future__ import annotations

import torch
from torch import nn


class Block(nn.Module):
    """x + W2 gelu(W1 LayerNorm(x)): two Linears (split) and a LayerNorm (fallback)."""

    def __init__(self, hidden: int, ffn: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, ffn)
        self.down = nn.Linear(ffn, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


def mlp_stages(num_stages: int, *, hidden: int = 32, ffn: int | None = None,
               layers_per_stage: int = 2, seed: int = 0) -> list[nn.Sequential]:
    """The example model's stages, in model order; the same `seed` gives the same weights.

    Every rank builds all stages from the seed and keeps its own, so no weights need to
    be sent; the unpipelined reference is ``nn.Sequential(*mlp_stages(...))``.
    """
    if num_stages < 1:
        raise ValueError(f"invalid 'num_stages': got {num_stages}; expected an integer >= 1")
    generator = torch.random.fork_rng(devices=[])
    with generator:
        torch.manual_seed(seed)
        return [nn.Sequential(*(Block(hidden, ffn or 4 * hidden)
                                for _ in range(layers_per_stage)))
                for _ in range(num_stages)]


def example_batch(num_microbatches: int, *, microbatch_size: int = 4, hidden: int = 32,
                  seed: int = 1) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Inputs and regression targets of one step: `num_microbatches` of each."""
    g = torch.Generator().manual_seed(seed)
    inputs = [torch.randn(microbatch_size, hidden, generator=g)
              for _ in range(num_microbatches)]
    targets = [torch.randn(microbatch_size, hidden, generator=g)
               for _ in range(num_microbatches)]
    return inputs, targets


def mse_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The example's loss of one microbatch."""
    return nn.functional.mse_loss(output, target)
