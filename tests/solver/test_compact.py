"""The compact op encoding (`model.compact`): one string of torch actions per rank,
written by `Schedule.compact_dump`, read back by `parse_schedule` and re-timed."""

from __future__ import annotations

import json

import pytest
from ppsched.solver.model import FBOp, Op, ProfileError, load_profile, parse_schedule
from ppsched.solver.model.compact import ENCODING, decode_rank, encode_rank, encode_scheduled
from ppsched.solver.model.offload_sizing import with_offload
from ppsched.solver.sim import schedule_from_orders, simulate
from ppsched.solver.sim.emit import scheduled_op
from ppsched.solver.solving import solve

from tests.api.test_cli import ROOT


def test_every_kind_round_trips_in_torch_syntax() -> None:
    ops = [Op("F", 0, 0), Op("B", 0, 0), Op("W", 0, 0), Op("BW", 3, 12), Op("R", 1, 2),
           Op("O", 1, 2), Op("L", 1, 2), FBOp(0, 3, 7, 2)]
    text = encode_rank(ops)
    # torch's actions: our B is its I, our BW its B; R, O, L keep our letters.
    assert text == "0F0,0I0,0W0,3B12,1R2,1O2,1L2,(0F3;7B2)OVERLAP_F_B"
    back = decode_rank(text, 0)
    assert [x["kind"] for x in back] == ["F", "B", "W", "BW", "R", "O", "L", "FB"]
    assert back[-1] == {"kind": "FB", "stage": 0, "microbatch": 3, "stage_b": 7,
                        "microbatch_b": 2}
    assert decode_rank("", 5) == []


def test_a_bad_cell_is_named_by_rank_and_place() -> None:
    with pytest.raises(ProfileError) as err:
        decode_rank("0F0,0X1", 3)
    assert err.value.field == "ranks.3.1" and err.value.value == "0X1"


@pytest.mark.parametrize("layouts", [((1, None),), ((2, "v"),)])
def test_compact_schedule_reads_back_to_the_same_orders_and_times(
        layouts: tuple) -> None:
    profile = load_profile(ROOT / "profiles" / "gpt1.5b-p8-m24.json")
    schedule = solve(profile, layouts=layouts)
    data = json.loads(json.dumps(schedule.compact_dump()))
    assert data["ops_encoding"] == ENCODING
    assert all(isinstance(rank, str) for rank in data["ranks"])
    # The rest of the JSON is the default one's.
    full = json.loads(schedule.model_dump_json())
    assert "ops_encoding" not in full
    assert {k: v for k, v in data.items() if k not in ("ranks", "ops_encoding")} == \
        {k: v for k, v in full.items() if k != "ranks"}
    back = parse_schedule(data)
    assert back.orders() == schedule.orders()
    assert all(op.start is None for rank in back.ranks for op in rank)
    sim = simulate(back.problem(), back.orders())
    assert sim.ok and sim.metrics is not None and schedule.metrics is not None
    assert sim.metrics.cost == pytest.approx(schedule.metrics.cost, abs=1e-9)
    retimed = schedule_from_orders(back.profile, back.orders(), back.method)
    assert [[(op.start, op.end) for op in rank] for rank in retimed.ranks] == \
        [[(op.start, op.end) for op in rank] for rank in schedule.ranks]


def test_policy_ops_keep_their_letters() -> None:
    # A schedule with R, O, L ops (DESIGN.md 6.3): lane and policy are implied, not
    # written, and come back as the validator implies them.
    profile = load_profile(ROOT / "profiles" / "uniform-p4-m8.json")
    orders = [[Op("F", 0, 0), Op("O", 0, 0), Op("F", 0, 1), Op("L", 0, 0), Op("BW", 0, 1),
               Op("BW", 0, 0)]]
    data = {"profile": {**profile.model_dump(mode="json"), "num_ranks": 1,
                        "num_microbatches": 2, "t_offload": 1.0,
                        "t_reload": 1.0},
            "ranks": [encode_rank(orders[0])]}
    back = parse_schedule(data)
    assert back.orders() == orders
    sim = simulate(back.problem(), back.orders())
    assert sim.ok, sim.violations


def test_the_model_ops_encode_as_their_orders() -> None:
    ops = [Op("F", 0, 0), FBOp(0, 3, 7, 2), Op("BW", 3, 12), Op("L", 1, 2)]
    assert encode_scheduled([scheduled_op(op, None, None) for op in ops]) == encode_rank(ops)
    profile = load_profile(ROOT / "profiles" / "gpt1.5b-p8-m24.json")
    schedule = solve(profile, layouts=((2, "v"),))
    assert schedule.compact_dump()["ranks"] == [encode_rank(ops) for ops in schedule.orders()]


@pytest.mark.parametrize("offload", [False, True])
def test_a_schedule_solved_without_its_ops_dumps_compact_alike(offload: bool) -> None:
    profile = load_profile(ROOT / "profiles" / "gpt1.5b-p8-m24.json")
    if offload:  # policy ops: lanes, policies and the host's memory
        profile = with_offload(profile.model_copy(update={"memory_limit": 4.0}), 0.5)
    full, lean = solve(profile), solve(profile, ops=False)
    assert full.has_ops and not lean.has_ops and lean.ranks == []
    for schedule in (full, lean):
        assert schedule.solver is not None
        schedule.solver.wall_s = 0.0
    assert lean.compact_dump() == full.compact_dump()
    assert lean.orders() == full.orders()
    assert lean.metrics == full.metrics
    assert (full.metrics is not None and full.metrics.host_memory is not None) == offload
    # Nothing writes its empty ranks as if they were the schedule's.
    with pytest.raises(ValueError, match="only compact_dump"):
        lean.model_dump_json()
    with pytest.raises(ValueError, match="no times"):
        lean.require_times()
