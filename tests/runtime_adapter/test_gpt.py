"""The small GPT: its stages compose to the model, and the tie survives a rank's copy."""

from __future__ import annotations

import copy

import pytest
import torch
from ppsched.runtime_adapter.gpt import (
    GPTConfig,
    gpt_batch,
    gpt_loss,
    gpt_model,
    layers_per_stage,
    split_stages,
    tied_parameters,
    tied_stages,
)


@pytest.mark.parametrize("num_stages", [1, 2, 4, 8])
def test_stages_in_order_are_the_model(num_stages: int) -> None:
    config = GPTConfig(layers=8)
    model = gpt_model(config, seed=3)
    tokens, _ = gpt_batch(config, 1)
    x = tokens[0]
    for stage in split_stages(model, num_stages):
        x = stage(x)
    assert torch.equal(x, model(tokens[0]))


def test_the_tie_is_one_parameter_on_one_rank_and_a_copy_on_two() -> None:
    stages = split_stages(gpt_model(GPTConfig()), 4)
    same_rank = copy.deepcopy({0: stages[0], 3: stages[3]})
    assert len(tied_parameters(same_rank)) == 1
    apart = [copy.deepcopy({s: stages[s]}) for s in tied_stages(4)]
    first, last = (tied_parameters(d)[0] for d in apart)
    assert first is not last and torch.equal(first, last)


def test_tied_gradient_is_the_sum_of_both_uses() -> None:
    config = GPTConfig()
    model = gpt_model(config)
    tokens, targets = gpt_batch(config, 1)
    gpt_loss(model(tokens[0]), targets[0]).backward()
    untied = gpt_model(config)
    untied.head.weight = torch.nn.Parameter(untied.embed.tok.weight.detach().clone())
    gpt_loss(untied(tokens[0]), targets[0]).backward()
    total = untied.embed.tok.weight.grad + untied.head.weight.grad
    assert torch.allclose(model.embed.tok.weight.grad, total, rtol=1e-5, atol=1e-7)


def test_layers_per_stage_gives_every_middle_stage_a_block() -> None:
    assert layers_per_stage(8, 4) == [2, 2, 2, 2]
    assert layers_per_stage(7, 8) == [1, 1, 1, 1, 1, 1, 1, 0]
    assert layers_per_stage(6, 8) == [0, 1, 1, 1, 1, 1, 1, 0]
    with pytest.raises(ValueError, match="'layers': got 4"):
        layers_per_stage(4, 8)
    with pytest.raises(ValueError, match="'heads'"):
        GPTConfig(dim=10, heads=3)
