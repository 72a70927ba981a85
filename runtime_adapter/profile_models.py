"""The profiler's built-in models, sized from its command line: the example MLP and the
small GPT (embeddings, attention, MLP, tied head)."""

from __future__ import annotations

import argparse
import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
from ppsched.runtime_adapter.stage import LossFn
from torch import nn


@dataclass(frozen=True)
class BuiltIn:
    """A model to profile: its stages (all, in model order) and one microbatch."""

    stages: Callable[[], list[nn.Module]]
    """Builds every stage; a rank keeps its own (see `own_stages`)."""
    example_input: torch.Tensor
    target: torch.Tensor
    loss_fn: LossFn


def built_in(args: argparse.Namespace, num_stages: int) -> BuiltIn:
    """``--model mlp`` (``--hidden``, ``--layers-per-stage``) or ``--model gpt``
    (``--hidden`` is the width, ``--layers-per-stage`` blocks per stage, ``--vocab``,
    ``--seq``, ``--heads``); ``--microbatch-size`` rows per microbatch."""
    if args.model == "gpt":
        from ppsched.runtime_adapter.gpt import (
            GPTConfig,
            gpt_batch,
            gpt_loss,
            gpt_model,
            split_stages,
        )

        config = GPTConfig(vocab=args.vocab, seq=args.seq, dim=args.hidden, heads=args.heads,
                           layers=args.layers_per_stage * num_stages)
        tokens, targets = gpt_batch(config, 1, microbatch_size=args.microbatch_size)
        return BuiltIn(lambda: list(split_stages(gpt_model(config, seed=0), num_stages)),
                       tokens[0], targets[0], gpt_loss)
    from ppsched.runtime_adapter.model import example_batch, mlp_stages, mse_loss

    inputs, targets = example_batch(1, microbatch_size=args.microbatch_size,
                                    hidden=args.hidden)
    return BuiltIn(lambda: list(mlp_stages(num_stages, hidden=args.hidden,
                                           layers_per_stage=args.layers_per_stage)),
                   inputs[0], targets[0], mse_loss)


def own_stages(model: BuiltIn, stages: tuple[int, ...], device: torch.device,
               ) -> dict[int, nn.Module]:
    """The given stages only, on `device`. The built-in models are small, so a rank builds
    them whole and keeps its own; one deepcopy keeps a tie between two of them one
    parameter (the GPT's embedding and head under the V placement)."""
    every = model.stages()
    return {s: module.to(device) for s, module in
            copy.deepcopy({s: every[s] for s in stages}).items()}
