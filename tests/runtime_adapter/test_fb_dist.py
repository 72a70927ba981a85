"""FB ops on real processes (gloo on CPU): the executor runs each FB as its F then its BW,
and a DualPipe-V step gives the unpipelined model's loss, gradients and Adam step."""

from __future__ import annotations

from typing import Any

import pytest
from ppsched.runtime_adapter.launch import launch_local
from ppsched.runtime_adapter.plan import plan_rank
from ppsched.solver.model.ops import FBOp, Op

from tests.runtime_adapter import workers

pytestmark = pytest.mark.dist

TOLERANCE = 1e-5  # relative, fp32, as in test_dist.py
# (method, microbatches, chunks, placement): DualPipe-V needs m >= 2p.
CASES: list[tuple[str, int, int, str | None]] = [("dualpipe-v", 4, 2, "v"),
                                                 ("dualpipe-v", 5, 2, "v")]


def test_plan_lowers_fb_to_f_then_bw() -> None:
    schedule = workers.build_schedule("dualpipe-v", 2, 4, 2, "v")
    fbs = [op for op in schedule.orders()[0] if isinstance(op, FBOp)]
    assert fbs
    plan = plan_rank(schedule, 0)
    assert all(op.kind != "FB" for op in plan.ops)
    fb = fbs[0]
    i = plan.ops.index(fb.forward)
    assert plan.ops[i + 1] == fb.backward == Op("BW", fb.stage_b, fb.microbatch_b)
    assert len(plan.ops) == sum(1 + isinstance(op, FBOp) for op in schedule.orders()[0])


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-m{c[1]}")
def test_dualpipe_v_step_equals_unpipelined_model(case: tuple[str, int, int, str | None],
                                                  ) -> None:
    # One launch per case: the worker keys its figures by method, chunks and placement.
    results: list[Any] = launch_local(workers.equivalence, 2, [case], timeout_s=300)
    method, _, v, placement = case
    per_rank = [rank[f"{method}-v{v}-{placement}"] for rank in results]
    workers.assert_equals_unpipelined(per_rank, TOLERANCE)
