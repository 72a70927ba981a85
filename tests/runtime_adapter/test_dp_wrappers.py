"""Data-parallel wrappers an engine cannot reduce correctly are refused, naming the module
and what to pass instead, never run with a silently local gradient (2x2 gloo, tied GPT).
The wrappings that do compose are in the correctness grid (test_grid.py)."""

from __future__ import annotations

import pytest
from ppsched.runtime_adapter.launch import LaunchError, launch_local

from tests.runtime_adapter import engine_side

pytestmark = pytest.mark.dist


def test_our_engine_refuses_fsdp2_stages_naming_the_supported_ways() -> None:
    for rank, message in enumerate(launch_local(engine_side.refusal, 4, "ppsched",
                                                "zb-h1", "fsdp", timeout_s=200)):
        assert "is wrapped in FSDPSequential (fully_shard)" in message, (rank, message)
        assert "dp_group=" in message and "engine='torch'" in message, (rank, message)


def test_torch_engine_refuses_ddp_when_the_schedule_splits_b_and_w() -> None:
    for rank, message in enumerate(launch_local(engine_side.refusal, 4, "torch",
                                                "zb-h1", "ddp", timeout_s=200)):
        assert "wrapped in DistributedDataParallel and the schedule (zb-h1) splits B and W" \
            in message, (rank, message)
        assert "fully_shard (FSDP2)" in message and "dp_group=" in message, (rank, message)


def test_torch_runtime_leaves_local_gradients_under_ddp_with_a_split_backward() -> None:
    # Why the refusal above: torch 2.13's split backward (stage_backward_input/_weight in
    # torch/distributed/pipelining/_backward.py) sets .grad from torch.autograd.grad, so
    # DDP's hooks never fire. Without the guard every rank's gradients stay far from the
    # data-parallel mean, and nothing raises. When torch changes this, the test fails:
    # revisit the refusal then.
    try:
        per_rank = launch_local(engine_side.torch_ddp_split_unguarded, 4, "zb-h1",
                                timeout_s=200)
    except LaunchError as exc:  # torch changed: revisit the refusal's message
        pytest.fail(f"torch's runtime now raises under DDP with a split backward: {exc}")
    for rank, figures in enumerate(per_rank):
        assert figures["grad"] > 0.1, (rank, figures)


def test_sharding_refuses_a_weight_two_stages_of_a_rank_share() -> None:
    # The V placement's rank 0: stage 0 (embedding) and stage 3 (head), one tied Parameter.
    message = launch_local(engine_side.fsdp_over_shared_parameter, 1, timeout_s=120)[0]
    assert message.startswith("invalid 'stages': shared by two stages of this rank: "
                              "0.0.tok.weight (stages 0, 3); fully_shard on each stage "
                              "would give each its own copy"), message
    assert "tied=" in message and "dp_group=" in message, message


def test_fully_shard_per_stage_splits_a_shared_weight_silently() -> None:
    # Why the refusal above: FSDP2 gives each fully_shard module its own sharded copy of
    # the tied weight, the two copies get part of the gradient each, and nothing raises.
    per_rank = launch_local(engine_side.torch_fsdp_shared_unguarded, 4, "zb-v",
                            timeout_s=200)
    for rank, figures in enumerate(per_rank):
        if rank % 2 == 0:
            assert figures["grad"] > 0.1, (rank, figures)


def test_ddp_stages_sharing_a_parameter_are_refused() -> None:
    message = launch_local(engine_side.ddp_over_shared_parameter, 1, timeout_s=120)[0]
    assert "two DDP modules would each reduce what two stages of this rank share: " \
        "0.0.weight (stages 0, 3), 0.0.bias (stages 0, 3);" in message, message


def test_wrappers_the_engines_cannot_reduce_are_refused_by_name() -> None:
    messages = launch_local(engine_side.misuse_messages, 1, timeout_s=120)[0]
    assert "stage 0 holds data-parallel wrappers inside it (0 (DistributedDataParallel))" \
        in messages["ppsched inner DDP"], messages
    assert "stages [0] are wrapped in DistributedDataParallel and stages [1] are not" \
        in messages["ppsched mixed"], messages
    assert "(1 (FSDPLinear)) but its root is Sequential" in messages["torch inner FSDP"], \
        messages
    assert "invalid 'dp_group': stage 0 is wrapped in DistributedDataParallel, which " \
        "reduces its gradients itself" in messages["torch DDP and dp_group"], messages
