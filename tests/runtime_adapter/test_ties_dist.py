"""``tied=`` misuse is refused by both engines, and ``check_grads`` names a parameter a
step left without a gradient (issue 30: both failures were silent)."""

from __future__ import annotations

import pytest
from ppsched.runtime_adapter.launch import launch_local

from tests.runtime_adapter import workers


@pytest.mark.dist
@pytest.mark.parametrize("engine", ["ppsched", "torch"])
@pytest.mark.parametrize(("case", "words"), [
    ("foreign", "ValueError: invalid 'tied': tied[0] (shape [3]) is not a parameter of "
                "this rank's stages"),
    ("shape", "ValueError: invalid 'tied': tied[0]'s members differ in shape (rank 0: "
              "[64, 16], rank 1: [64])"),
    ("no-grad", "MissingGradients: rank {rank}: the step left 1 parameter(s) that require "
                "grad without a gradient: stage {rank}: unused"),
])
def test_tied_misuse_and_missing_gradients_are_named(engine: str, case: str,
                                                      words: str) -> None:
    errors = launch_local(workers.tied_misuse, 2, engine, case, timeout_s=300)
    for rank, error in enumerate(errors):
        assert words.format(rank=rank) in error, error


@pytest.mark.dist
def test_a_tied_weight_taken_before_fully_shard_is_refused_and_the_returned_one_used(
        ) -> None:
    results = launch_local(workers.tied_before_fully_shard, 2, timeout_s=300)
    for refused, returned_is_the_stages in results:
        assert "is a plain tensor, but the stages hold DTensor parameters" in refused
        assert "taken before fully_shard" in refused
        assert returned_is_the_stages
