"""Microbatches of different sequence lengths on 2 real gloo ranks: the variable-shape
executor follows the schedule's microbatch_order, and the step's loss and gradients equal
the unpipelined model's."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from ppsched.runtime_adapter.launch import launch_local
from ppsched.runtime_adapter.model import Block
from ppsched.runtime_adapter.varlen import VariableShapeExecutor, microbatch_order
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.model.schedule import Schedule, parse_schedule
from ppsched.solver.solving.entry import solve
from torch import nn

pytestmark = pytest.mark.dist

HIDDEN = 8
LENGTHS = [5, 17, 2, 11, 8, 3]  # tokens per microbatch, input order
TOLERANCE = 1e-5  # relative, fp32, as in test_dist.py


class CausalStage(nn.Module):
    """A Block, then a causal running mean over the sequence: each token sees the ones
    before it, so the sequence length matters (a per-token model would not notice)."""

    def __init__(self) -> None:
        super().__init__()
        self.block = Block(HIDDEN, 2 * HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.block(x)
        counts = torch.arange(1, h.shape[0] + 1, dtype=h.dtype).unsqueeze(1)
        return h + h.cumsum(0) / counts


def stages(num_stages: int) -> list[nn.Module]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        return [CausalStage() for _ in range(num_stages)]


def batch() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    g = torch.Generator().manual_seed(9)
    inputs = [torch.randn(s, HIDDEN, generator=g) for s in LENGTHS]
    targets = [torch.randn(s, HIDDEN, generator=g) for s in LENGTHS]
    return inputs, targets


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return nn.functional.mse_loss(output, target)


def build(method: str, p: int, order: list[int] | None, chunks: int = 1) -> Schedule:
    """The schedule `method` makes, with `order` (input microbatch of each scheduled one)
    put on it when given."""
    data: dict[str, Any] = {"num_ranks": p, "num_microbatches": len(LENGTHS),
                            "num_chunks": chunks, "t_f": 1.0, "t_b": 1.0, "t_w": 1.0,
                            "m_b": 1.0, "m_w": 1.0}
    if chunks > 1:
        data["placement"] = "v"
    schedule = solve(parse_profile(data), method)
    if order is None:
        return schedule
    return parse_schedule({**schedule.model_dump(mode="json"), "microbatch_order": order})


def equivalence(rank: int, world: int, cases: list[tuple[str, list[int] | None, int]],
                ) -> dict[str, dict[str, float]]:
    out = {}
    for method, order, chunks in cases:
        schedule = build(method, world, order, chunks)
        problem = schedule.profile.problem
        model = stages(problem.num_stages)
        inputs, targets = batch()
        reference = nn.Sequential(*copy.deepcopy(model))
        ref_losses = [loss_fn(reference(x), y) for x, y in zip(inputs, targets, strict=True)]
        ref_loss = sum(ref_losses) / len(inputs)
        ref_loss.backward()
        mine = {s: copy.deepcopy(model[s]) for s in problem.rank_to_stages[rank]}
        executor = VariableShapeExecutor(schedule, mine, loss_fn, timeout_s=60)
        # Two steps: shapes change within a step and the second step is not held to the
        # first one's shapes.
        executor.run(inputs, targets)
        result = executor.run(inputs, targets)
        grad_err = max(float((p.grad - q.grad).norm() / q.grad.norm().clamp_min(1e-30))
                       for s in mine for p, q in zip(mine[s].parameters(),
                                                     reference[s].parameters(), strict=True))
        loss_err = 0.0 if result.loss is None else \
            abs(result.loss - ref_loss.item()) / abs(ref_loss.item())
        # Scheduled microbatch j ran input order[j]: its loss is that input's loss.
        last = executor.runners.get(problem.num_stages - 1)
        scheduled = order or list(range(len(LENGTHS)))
        order_err = 0.0 if last is None else max(
            abs(float(last.losses[j]) - ref_losses[i].item()) / ref_losses[i].item()
            for j, i in enumerate(scheduled))
        out[f"{method}-{order}-v{chunks}"] = {
            "order": order_err,
            "loss": loss_err, "grad": grad_err, "has_loss": float(result.loss is not None),
            "held": float(sum(a + b for a, b in (r.held() for r in
                                                  executor.runners.values())))}
    return out


CASES: list[tuple[str, list[int] | None, int]] = [
    ("1f1b", None, 1),
    ("heuristic", [3, 1, 5, 0, 4, 2], 1),
    ("zb-v", [1, 0, 2, 3, 5, 4], 2),
]


def test_microbatch_order_reads_the_schedule() -> None:
    assert microbatch_order(build("1f1b", 2, None), 6) == list(range(6))
    assert microbatch_order(build("1f1b", 2, [5, 4, 3, 2, 1, 0]), 6) == [5, 4, 3, 2, 1, 0]


def test_variable_lengths_equal_the_unpipelined_model() -> None:
    results: list[dict[str, dict[str, float]]] = launch_local(equivalence, 2, CASES,
                                                              timeout_s=300)
    for method, order, chunks in CASES:
        per_rank = [r[f"{method}-{order}-v{chunks}"] for r in results]
        for rank, figures in enumerate(per_rank):
            assert figures["loss"] <= TOLERANCE, (method, rank, figures)
            assert figures["grad"] <= TOLERANCE, (method, rank, figures)
            assert figures["held"] == 0, (method, rank, figures)
            assert figures["order"] <= TOLERANCE, (method, rank, figures)
        assert sum(f["has_loss"] for f in per_rank) == 1
