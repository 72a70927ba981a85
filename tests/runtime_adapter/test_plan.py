"""Lowering a schedule to per-rank plans: messages, the sender's order, refusals."""

from __future__ import annotations

from ppsched.runtime_adapter.plan import check_schedule, plan_rank
from ppsched.solver.model.ops import Op
from ppsched.solver.model.schedule import parse_schedule

from tests.runtime_adapter.workers import build_schedule, gpipe_per_chunk


def test_every_sent_message_is_awaited_once_on_its_receiver() -> None:
    for schedule in (build_schedule("zb-h1", 4, 8), gpipe_per_chunk(2, 4, 2, "v"),
                     gpipe_per_chunk(4, 4, 2, "loop")):
        plans = [plan_rank(schedule, r) for r in range(schedule.profile.num_ranks)]
        sent = sorted(str(m) for p in plans for msgs in p.sends for m in msgs)
        needed = sorted(str(m) for p in plans for m in p.needs if m is not None)
        assert sent == needed
        for plan in plans:
            for src, channel in plan.recv_order.items():
                # The receive order on a channel is the sender's send order.
                sender = [m for msgs in plans[src].sends for m in msgs if m.dst_rank == plan.rank]
                assert list(channel) == sender


def test_v_placement_keeps_the_turn_on_one_rank() -> None:
    plan = plan_rank(gpipe_per_chunk(2, 2, 2, "v"), 1)  # stages 1 and 2 on rank 1
    assert plan.stages == (1, 2)
    f1 = plan.ops.index(Op("F", 1, 0))
    assert plan.sends[f1] == ()  # stage 2 is local
    assert plan.needs[plan.ops.index(Op("F", 2, 0))] is None


def test_check_schedule_names_what_does_not_match() -> None:
    schedule = build_schedule("1f1b", 2, 4)
    assert check_schedule(schedule, 0, 2, {0}) is None
    assert "expected the world size 3" in check_schedule(schedule, 0, 3, {0})
    assert "got modules for stages [0, 1]; expected stages [1]" in \
        check_schedule(schedule, 1, 2, {0, 1})
    data = schedule.model_dump(mode="json")
    data["ranks"][0].pop()  # rank 0 loses its last op
    broken = parse_schedule(data)
    message = check_schedule(broken, 0, 2, {0})
    assert message is not None and "breaks the cost model's contract" in message
