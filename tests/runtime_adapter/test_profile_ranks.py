"""Per-rank profiling: each gloo rank builds and measures only its own stages of the small
GPT, rank 0 writes one profile the solver accepts, with the embedding's W stash above F."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ppsched.runtime_adapter.gpt import GPTConfig, gpt_batch, gpt_loss, gpt_model, split_stages
from ppsched.runtime_adapter.launch import LaunchError, launch_local
from ppsched.runtime_adapter.profiler import MIB
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.solving.entry import solve

# A vocabulary much larger than a microbatch's tokens: the embedding's dense gradient
# (vocab x dim) is made in B and held until W.
ROOT = Path(__file__).resolve().parents[2]
CONFIG = GPTConfig(vocab=2048, seq=8, dim=16, heads=2, layers=4)


def profile_on_ranks(rank: int, world: int, chunks: int, placement: str | None,
                     wrong: bool) -> dict[str, Any] | None:
    from ppsched.runtime_adapter.profile_ranks import profile_model

    num_stages = world * chunks
    owned = parse_profile({"name": "x", "num_ranks": world, "num_microbatches": 4,
                           "num_chunks": chunks, "placement": placement, "t_f": 1.0,
                           "t_b": 1.0, "t_w": 1.0, "m_b": 1.0, "m_w": 1.0}
                          ).problem.rank_to_stages

    def stages_for_rank(r: int) -> dict[int, Any]:
        stages = split_stages(gpt_model(CONFIG, seed=0), num_stages)
        keep = [(s + 1) % num_stages for s in owned[r]] if wrong else owned[r]
        return copy.deepcopy({s: stages[s] for s in keep})  # one deepcopy: ties kept

    tokens, targets = gpt_batch(CONFIG, 1, microbatch_size=2)
    return profile_model(stages_for_rank, tokens[0], gpt_loss, targets[0],
                         num_microbatches=4, num_chunks=chunks, placement=placement,
                         warmup=0, iters=1, name="gpt-ranks")


@pytest.mark.dist
@pytest.mark.parametrize(("chunks", "placement"), [(1, None), (2, "v")])
def test_each_rank_profiles_its_stages_and_rank_0_writes_one_profile(
        chunks: int, placement: str | None) -> None:
    first, second = launch_local(profile_on_ranks, 2, chunks, placement, False,
                                 timeout_s=300)
    assert second is None and first is not None
    num_stages = 2 * chunks
    assert [len(first[k]) for k in ("t_f", "t_b", "t_w", "m_b", "m_w")] == [num_stages] * 5
    assert all(t > 0 for k in ("t_f", "t_b", "t_w") for t in first[k])
    assert first["t_comm"] > 0  # measured between the two ranks
    assert "on 2 ranks, each measuring its own stages" in first["description"]
    m_b, m_w = first["m_b"], first["m_w"]
    assert m_w[0] >= CONFIG.vocab * CONFIG.dim * 4 / MIB > m_b[0]
    assert "W holds more than F on stage(s) 0" in first["description"]
    parsed = parse_profile(first)
    assert parsed.problem.m_w[0] == m_w[0]
    schedule = solve(parsed, "zb-v" if placement == "v" else "zb-h1")
    assert schedule.metrics is not None and schedule.metrics.peak_memory[0] >= m_w[0]


@pytest.mark.dist
def test_stages_the_placement_does_not_give_the_rank_are_named() -> None:
    with pytest.raises(LaunchError, match=r"invalid 'stages_for_rank': got 'rank 0: "
                       r"stages \[1\]'; expected the stages \[0\]"):
        launch_local(profile_on_ranks, 2, 1, None, True, timeout_s=120)


@pytest.mark.dist
def test_torchrun_profiles_the_gpt_per_rank(tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    ran = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
         "2", "-m", "ppsched.runtime_adapter.profile_cli", "--ranks", "2",
         "--model", "gpt", "--hidden", "32", "--seq", "16", "--microbatch-size", "2",
         "--layers-per-stage", "1", "--iters", "1", "-o", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
    assert ran.returncode == 0, ran.stderr[-2000:]
    profile = json.loads(out.read_text())
    assert profile["num_ranks"] == 2 and len(profile["t_f"]) == 2
    assert "on 2 ranks, each measuring its own stages" in profile["description"]
    assert profile["t_op"] > 0 and "t_op: the executor's own time per op" in \
        profile["description"]
    assert profile["m_w"][0] > profile["m_b"][0]  # the 2048-word embedding's gradient
    parse_profile(profile)
