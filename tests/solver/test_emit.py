"""The schedule's fast construction (solver/sim/emit.py): the same objects as pydantic's."""

from __future__ import annotations

import pytest
from ppsched.solver.model.ops import FBOp, Op
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.model.schedule import ScheduledOp, parse_schedule
from ppsched.solver.sim.emit import _rank_ops, schedule_from_orders, scheduled_op
from ppsched.solver.solving.entry import solve

_OPS = [(Op("F", 2, 5), 1.5, 2.0), (Op("B", 0, 0), 0.0, 3.25), (Op("W", 7, 1), None, None),
        (Op("BW", 1, 3), 4.0, 6.0), (FBOp(0, 2, 1, 0), 8.0, 9.5)]


@pytest.mark.parametrize(("op", "start", "end"), _OPS)
def test_scheduled_op_equals_the_validated_construction(op: Op, start: float | None,
                                                        end: float | None) -> None:
    fields = {"kind": op.kind, "stage": op.stage, "microbatch": op.microbatch,
              "start": start, "end": end, "stage_b": getattr(op, "stage_b", None),
              "microbatch_b": getattr(op, "microbatch_b", None), "lane": None,
              "policy": None}
    validated = ScheduledOp.model_validate(fields)
    fast = scheduled_op(op, start, end)
    assert fast == validated
    assert fast.model_fields_set == validated.model_fields_set
    assert fast.model_dump() == validated.model_dump()
    assert fast.model_dump_json() == validated.model_dump_json()
    assert fast.op == op
    assert fast == ScheduledOp.model_construct(**fields)


def test_a_rank_of_ops_is_built_as_op_by_op() -> None:
    # The inlined loop of `_rank_ops` (plain ops) builds what `scheduled_op` builds, FBs
    # among them; the plain ops share one set of fields (issue 27: a copy each was most
    # of an op's memory), which holds every field, so an assignment changes no op's.
    ops, starts, ends = (list(x) for x in zip(*_OPS, strict=True))
    built = _rank_ops(ops, starts, ends)
    one_by_one = [scheduled_op(op, start, end) for op, start, end in _OPS]
    assert built == one_by_one
    assert [x.model_dump_json() for x in built] == [x.model_dump_json() for x in one_by_one]
    assert [x.model_fields_set for x in built] == [x.model_fields_set for x in one_by_one]
    plain = [x for x in built if x.kind != "FB"]
    assert len({id(x.model_fields_set) for x in plain}) == 1
    plain[0].start = 99.0
    assert [x.model_fields_set for x in built] == [x.model_fields_set for x in one_by_one]


def test_a_solved_schedule_round_trips_through_validation() -> None:
    # Every op of an emitted schedule, read back by the validating parser, is the same.
    profile = parse_profile({"num_ranks": 4, "num_microbatches": 8, "t_f": 1.0,
                             "t_b": 1.0, "t_w": 1.0, "t_comm": 0.25, "m_b": 1.0, "m_w": 0.5,
                             "memory_limit": 6.0})
    schedule = solve(profile)
    again = parse_schedule(schedule.model_dump(mode="json"))
    assert again.ranks == schedule.ranks
    orders = [[x.op for x in r] for r in schedule.ranks]
    # The schedule echoes the profile it was solved for: the cut one where a layout won.
    assert schedule_from_orders(schedule.profile, orders, schedule.method).ranks \
        == schedule.ranks


def test_scheduled_op_carries_a_copy_lane_and_a_policy() -> None:
    # DESIGN.md 6.3: an O names its copy lane and its activation's policy.
    fields = {"kind": "O", "stage": 1, "microbatch": 2, "start": 1.0, "end": 2.5,
              "stage_b": None, "microbatch_b": None, "lane": "d2h", "policy": "offload"}
    fast = scheduled_op(Op("O", 1, 2), 1.0, 2.5, "d2h", "offload")
    assert fast == ScheduledOp.model_validate(fields)
    assert fast.model_dump_json() == ScheduledOp.model_validate(fields).model_dump_json()


def test_an_emitted_op_takes_assignments_like_a_validated_one() -> None:
    # Assigning one field of one op (as the views' tests and users do) neither fails nor
    # touches another op; the ops' shared set of fields already holds every field.
    schedule = solve(parse_profile({"num_ranks": 2, "num_microbatches": 2, "t_f": 1.0,
                                    "t_b": 1.0, "t_w": 1.0, "m_b": 1.0, "m_w": 0.5}))
    first, second = schedule.ranks[0][0], schedule.ranks[0][1]
    first.start = None
    assert first.start is None and second.start is not None
    assert first.model_fields_set == second.model_fields_set == set(type(first).model_fields)
