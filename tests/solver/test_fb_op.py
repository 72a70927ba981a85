"""The FB op (DESIGN.md 6.4): an F overlapped with a BW on one rank. Timing by hand, every
validator rule (both parts' dependencies, memory, each part once), JSON and torch text."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from ppsched.solver.model.bounds import fb_lower_bound
from ppsched.solver.model.errors import ProfileError, ScheduleInvalid
from ppsched.solver.model.ops import FBOp, Op, op_from_torch, parts
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.model.schedule import parse_schedule
from ppsched.solver.sim.emit import schedule_from_orders
from ppsched.solver.sim.simulator import duration, peak_memory, simulate, validate


def _data(**fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"num_ranks": 2, "num_microbatches": 3, "t_f": 1.0, "t_b": 1.0,
                            "t_w": 1.0, "t_comm": 0.5, "m_b": 1.0, "m_w": 0.5,
                            "overlap": 0.5}
    data.update(fields)
    return data


def _problem(**fields: Any) -> Problem:
    return parse_profile(_data(**fields)).problem


def _two_rank_order() -> list[list[Op]]:
    return [
        [Op("F", 0, 0), Op("F", 0, 1), FBOp(0, 2, 0, 0), Op("BW", 0, 1), Op("BW", 0, 2)],
        [Op("F", 1, 0), FBOp(1, 1, 1, 0), FBOp(1, 2, 1, 1), Op("BW", 1, 2)],
    ]


def test_fb_timing_by_hand() -> None:
    problem = _problem()
    sim = validate(problem, _two_rank_order())
    # Rank 0's FB waits for its BW part's input: BW(1, 0) ends at 4.0, + t_comm 0.5; it
    # takes overlap * (t_f + t_b + t_w) = 0.5 * 3.
    assert sim.start[0] == [0.0, 1.0, 4.5, 8.5, 10.5]
    assert sim.end[0] == [1.0, 2.0, 6.0, 10.5, 12.5]
    # Rank 1's second FB waits for its F part's input: F(0, 2) ends with rank 0's FB.
    assert sim.start[1] == [1.5, 2.5, 6.5, 8.0]
    assert sim.end[1] == [2.5, 4.0, 8.0, 10.0]
    assert sim.metrics is not None
    assert sim.metrics.cost == 12.5
    assert sim.metrics.busy == (7.5, 6.0)  # the FBs' own time, not their parts'
    assert sim.metrics.bubble_rate == pytest.approx((12.5 - 7.5) / 12.5)
    # An FB holds its F's activations before its BW frees: 3 on rank 0, then 2.
    assert sim.metrics.peak_memory == (3.0, 2.0)
    assert peak_memory(problem, _two_rank_order()) == [3.0, 2.0]


def test_fb_duration_and_overlap_one_is_never_faster_than_its_parts() -> None:
    problem = _problem(overlap=1.0, t_comm=0.0)
    assert duration(problem, FBOp(0, 2, 0, 0)) == 3.0
    split = [[op for x in rank for op in parts(x)] for rank in _two_rank_order()]
    fused = simulate(problem, _two_rank_order()).metrics
    plain = simulate(problem, split).metrics
    assert fused is not None and plain is not None
    assert fused.cost >= plain.cost
    assert fused.lower_bound == plain.lower_bound  # overlap 1: the profile's bound


def test_fb_lower_bound_holds_and_is_below_the_plain_one() -> None:
    problem = _problem()
    sim = validate(problem, _two_rank_order())
    assert sim.metrics is not None
    # Rank 0: 3 F + 3 BW = 9 of work; at best all but one F and one B overlapped.
    assert fb_lower_bound(problem) == 0.5 * 9 + 0.5 * (1 + 1)
    assert sim.metrics.lower_bound == fb_lower_bound(problem) <= sim.metrics.cost


@pytest.mark.parametrize(("order", "kind", "rank", "position"), [
    # The F part also given as a plain F.
    ([[Op("F", 0, 0), Op("F", 0, 1), Op("F", 0, 2), FBOp(0, 2, 0, 0), Op("BW", 0, 1),
       Op("BW", 0, 2)], [Op("F", 1, 0), FBOp(1, 1, 1, 0), FBOp(1, 2, 1, 1), Op("BW", 1, 2)]],
     "duplicate", 0, 3),
    # The BW part also given as a plain BW.
    ([[Op("F", 0, 0), Op("F", 0, 1), FBOp(0, 2, 0, 0), Op("BW", 0, 1), Op("BW", 0, 2)],
      [Op("F", 1, 0), FBOp(1, 1, 1, 0), FBOp(1, 2, 1, 1), Op("BW", 1, 2), Op("BW", 1, 0)]],
     "duplicate", 1, 4),
    # The BW part and a split B/W of the same pair.
    ([[Op("F", 0, 0), Op("F", 0, 1), FBOp(0, 2, 0, 0), Op("BW", 0, 1), Op("BW", 0, 2),
       Op("W", 0, 0)],
      [Op("F", 1, 0), FBOp(1, 1, 1, 0), FBOp(1, 2, 1, 1), Op("BW", 1, 2)]],
     "mixed_backward", 0, 2),
    # The BW part's stage runs on the other rank.
    ([[Op("F", 0, 0), Op("F", 0, 1), FBOp(0, 2, 1, 0), Op("BW", 0, 1), Op("BW", 0, 2)],
      [Op("F", 1, 0), Op("F", 1, 1), Op("BW", 0, 0), FBOp(1, 2, 1, 1), Op("BW", 1, 2)]],
     "wrong_rank", 0, 2),
    # The BW part's microbatch does not exist.
    ([[Op("F", 0, 0), Op("F", 0, 1), FBOp(0, 2, 0, 7), Op("BW", 0, 1), Op("BW", 0, 2)],
      [Op("F", 1, 0), FBOp(1, 1, 1, 0), FBOp(1, 2, 1, 1), Op("BW", 1, 2)]],
     "unknown_op", 0, 2),
    # Rank 0's FB waits for BW(1, 0), queued behind an FB that waits for rank 0's F(0, 2).
    ([[Op("F", 0, 0), Op("F", 0, 1), FBOp(0, 2, 0, 0), Op("BW", 0, 1), Op("BW", 0, 2)],
      [Op("F", 1, 0), FBOp(1, 2, 1, 1), FBOp(1, 1, 1, 0), Op("BW", 1, 2)]],
     "deadlock", 0, 2),
])
def test_fb_violation_kind_and_place(order: list[list[Op]], kind: str, rank: int,
                                     position: int) -> None:
    sim = simulate(_problem(), order)
    assert any(v.kind == kind and v.rank == rank and v.position == position
               for v in sim.violations), sim.violations
    assert sim.metrics is None


def test_fb_missing_part_reported_when_fb_refused() -> None:
    # A refused FB does not count as either part: its F and (as B and W) its backward are
    # reported missing.
    order = _two_rank_order()
    order[0][2] = FBOp(0, 2, 0, 9)
    messages = [v.message for v in simulate(_problem(), order).violations]
    assert any("0F2" in m and "missing" in m for m in messages)
    assert any("0B0" in m and "missing" in m for m in messages)


def test_fb_of_its_own_forward_is_refused() -> None:
    problem = _problem(num_ranks=1, num_microbatches=1, t_comm=0.0)
    sim = simulate(problem, [[FBOp(0, 0, 0, 0)]])
    assert [v.kind for v in sim.violations] == ["fb_self"] + ["missing"] * 3  # F, B, W


def test_fb_memory_limit_flagged_during_the_fb() -> None:
    # Rank 0 holds 2 before its FB, 3 during it (F part), 2 after: a limit of 2.5 is broken
    # only inside the FB.
    problem = _problem(memory_limit=2.5)
    sim = simulate(problem, _two_rank_order())
    memory = [v for v in sim.violations if v.kind == "memory"]
    assert [(v.rank, v.position) for v in memory] == [(0, 2)]
    assert "during" in memory[0].message
    with pytest.raises(ScheduleInvalid, match="memory_limit"):
        validate(problem, _two_rank_order())


def test_fb_json_round_trip() -> None:
    profile = parse_profile(_data())
    schedule = schedule_from_orders(profile, _two_rank_order(), "custom")
    data = schedule.model_dump(mode="json")
    assert data["ranks"][0][2] == {"kind": "FB", "stage": 0, "microbatch": 2, "stage_b": 0,
                                   "microbatch_b": 0, "start": 4.5, "end": 6.0}
    assert "stage_b" not in data["ranks"][0][0]  # other ops keep DESIGN.md section 4's JSON
    back = parse_schedule(data)
    assert back.orders() == _two_rank_order()
    assert back.profile.overlap == 0.5
    assert back.model_dump(mode="json") == data


@pytest.mark.parametrize("op", [
    {"kind": "FB", "stage": 0, "microbatch": 2},
    {"kind": "FB", "stage": 0, "microbatch": 2, "stage_b": 0},
    {"kind": "F", "stage": 0, "microbatch": 2, "stage_b": 0, "microbatch_b": 1},
])
def test_fb_json_fields_checked(op: dict[str, Any]) -> None:
    data = schedule_from_orders(parse_profile(_data()), _two_rank_order(), "custom") \
        .model_dump(mode="json")
    data["ranks"][0][2] = op
    with pytest.raises(ProfileError, match=r"ranks\.0\.2.*stage_b"):
        parse_schedule(data)


@pytest.mark.parametrize("value", [0, -0.5, 1.5, float("inf"), "0.5"])
def test_overlap_refused_with_named_error(value: Any) -> None:
    with pytest.raises(ProfileError, match="'overlap'") as info:
        parse_profile(_data(overlap=value))
    assert info.value.field == "overlap"


def test_profile_without_overlap_means_one() -> None:
    data = _data()
    del data["overlap"]
    assert parse_profile(data).problem.overlap == 1.0


def test_fb_torch_text_and_pickle() -> None:
    op = FBOp(0, 3, 7, 2)
    assert op.to_torch() == "(0F3;7B2)OVERLAP_F_B"
    assert op_from_torch("(0F3;7B2)OVERLAP_F_B") == op
    assert op_from_torch("0I3") == Op("B", 0, 3)
    kind, stage, microbatch = op  # unpacks like every other op
    assert (kind, stage, microbatch) == ("FB", 0, 3)
    assert op != FBOp(0, 3, 7, 1) and op != Op("FB", 0, 3)
    assert pickle.loads(pickle.dumps(op)) == op
    assert op.cell(with_stage=True) == "F3s0&BW2s7"
    with pytest.raises(ValueError, match="OVERLAP_F_B"):
        op_from_torch("(0F3;7I2)OVERLAP_F_B")


def test_exact_bound_without_fb_is_not_a_lower_bound_when_overlap_below_one() -> None:
    from ppsched.solver.solving import ExactOptions, solve

    profile = parse_profile(_data(num_microbatches=2, t_comm=0.0))
    schedule = solve(profile, "ilp", exact=ExactOptions(time_limit_s=10.0, workers=1),
                     layouts=((1, None),))
    assert schedule.metrics is not None and schedule.solver is not None
    # The exact model proves its optimum over schedules without FB; FBs may beat it.
    assert schedule.metrics.lower_bound == fb_lower_bound(profile.problem)
    assert schedule.solver.status != "optimal"
    assert schedule.solver.bound_without_fb >= schedule.metrics.lower_bound
    assert schedule.solver.bound == schedule.metrics.lower_bound


def test_heuristic_picks_dualpipe_v_and_ilp_keeps_it_when_overlap_pays() -> None:
    from ppsched.solver.solving import ExactOptions, solve

    profile = parse_profile({"num_ranks": 2, "num_microbatches": 4, "num_chunks": 2,
                             "placement": "v", "t_f": 1.0, "t_b": 1.0, "t_w": 1.0,
                             "m_b": 1.0, "m_w": 0.5, "overlap": 0.5})
    heuristic = solve(profile, "heuristic")
    assert heuristic.method.startswith("heuristic:dualpipe-v")
    exact = solve(profile, "ilp", exact=ExactOptions(time_limit_s=10.0, workers=1))
    assert exact.metrics is not None and exact.solver is not None
    assert heuristic.metrics is not None
    # The exact model (no FB) cannot reach the FB schedule: its "bound" is above it.
    assert exact.solver.bound_without_fb is not None
    assert exact.metrics.cost <= heuristic.metrics.cost < exact.solver.bound_without_fb
    assert any(op.kind == "FB" for rank in exact.ranks for op in rank)


@pytest.mark.parametrize("overlap", [0.8, 0.6])
def test_fb_fusion_post_pass_improves_and_stays_valid(overlap: float) -> None:
    from ppsched.solver.generators import get_generator
    from ppsched.solver.heuristic.fb_fusion import fuse_fb
    from ppsched.solver.solving.entry import solve

    data = {"num_ranks": 4, "num_microbatches": 8, "num_chunks": 2, "placement": "v",
            "t_f": 1.0, "t_b": 1.0, "t_w": 1.0, "m_b": 1.0, "m_w": 0.5, "overlap": overlap}
    problem = parse_profile(data).problem
    orders = get_generator("dualpipe-v")(problem)
    before = validate(problem, orders).metrics
    fused = fuse_fb(problem, orders)
    after = validate(problem, fused).metrics
    assert before is not None and after is not None
    assert after.cost < before.cost
    count = sum(isinstance(op, FBOp) for ops in fused for op in ops)
    assert count > sum(isinstance(op, FBOp) for ops in orders for op in ops)
    schedule = solve(parse_profile(data), "heuristic")
    assert schedule.method.endswith("+fb")
    assert schedule.metrics is not None and schedule.metrics.cost <= after.cost + 1e-9


def test_fb_fusion_leaves_overlap_one_alone() -> None:
    from ppsched.solver.heuristic.fb_fusion import fuse_fb

    problem = _problem(overlap=1.0)
    plain = [[op for x in rank for op in parts(x)] for rank in _two_rank_order()]
    assert fuse_fb(problem, plain) == plain


def test_ops_from_text_reads_what_ops_print() -> None:
    from ppsched.solver.model.ops import ops_from_text

    ops = [Op("F", 0, 3), Op("BW", 12, 0), Op("O", 1, 2), Op("W", 3, 10)]
    assert ops_from_text(" ".join(map(str, ops))) == ops
    assert ops_from_text("F0 R1 L2", stage=5) == [Op("F", 5, 0), Op("R", 5, 1), Op("L", 5, 2)]
    with pytest.raises(ValueError, match="not an op: '0X1'"):
        ops_from_text("0F0 0X1")
