"""The per-op overhead `t_op` (DESIGN.md section 3 extension, issue 30): every compute op
takes its time plus t_op, whatever the microbatch and whatever the cut."""

from __future__ import annotations

import json

import pytest
from ppsched.solver.model import ProfileError, parse_profile, with_chunks
from ppsched.solver.solving import solve

BASE = {"num_ranks": 4, "num_microbatches": 8, "t_f": 1.0, "t_b": 2.0, "t_w": 1.5,
        "m_b": 1.0, "m_w": 0.5}


@pytest.mark.parametrize("t_op", [0.0, 0.25, 1.0])
def test_1f1b_with_overhead_follows_the_closed_form(t_op: float) -> None:
    # 1F1B's makespan with identical stages and no latency: (m + p - 1)(t_f + t_b + t_w),
    # each op t_op longer.
    schedule = solve(parse_profile({**BASE, "t_op": t_op}), "1f1b")
    assert schedule.metrics is not None
    p, m = BASE["num_ranks"], BASE["num_microbatches"]
    assert schedule.metrics.makespan == pytest.approx((m + p - 1) * (4.5 + 3 * t_op))


def test_a_cut_pays_the_overhead_on_every_chunk_op() -> None:
    # Two chunks per rank halve each op's work but not its overhead.
    problem = with_chunks(parse_profile({**BASE, "t_op": 0.25}), 2, "v").problem
    assert problem.t_f == pytest.approx((0.5 + 0.25,) * 8)
    assert problem.t_b == pytest.approx((1.0 + 0.25,) * 8)


def test_unequal_microbatches_scale_the_work_not_the_overhead() -> None:
    sizes = {"microbatches": [{"scale": 2.0}, *[{"scale": 1.0}] * 7]}
    plain = parse_profile({**BASE, **sizes}).problem
    with_overhead = parse_profile({**BASE, **sizes, "t_op": 0.5}).problem
    for name in ("t_f_mb", "t_b_mb", "t_w_mb"):
        for row, plain_row in zip(getattr(with_overhead, name), getattr(plain, name),
                                  strict=True):
            assert row == pytest.approx(tuple(x + 0.5 for x in plain_row))
    assert plain.t_f_mb[0][0] == pytest.approx(2 * plain.t_f_mb[0][1])  # the work scaled


def test_recompute_pays_it_too() -> None:
    problem = parse_profile({**BASE, "t_op": 0.25, "t_r": 0.75}).problem
    assert problem.t_r == pytest.approx((1.0,) * 4)
    assert parse_profile({**BASE, "t_op": 0.25, "m_ckpt": 0.0}).problem.t_r == \
        pytest.approx((1.25,) * 4)


def test_no_overhead_leaves_the_json_as_before() -> None:
    assert "t_op" not in json.loads(parse_profile(BASE).model_dump_json())
    assert json.loads(parse_profile({**BASE, "t_op": 0.1}).model_dump_json())["t_op"] == 0.1


@pytest.mark.parametrize("bad", [-1.0, float("inf")])
def test_a_bad_overhead_is_named(bad: float) -> None:
    with pytest.raises(ProfileError, match="t_op"):
        parse_profile({**BASE, "t_op": bad})
