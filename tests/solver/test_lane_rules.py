"""The timing rules of DESIGN.md 6.3 (solver/sim/lane_rules.py) on stated times, and shared
copy lanes (``shared_host_link``) timed first come, first served (solver/sim/lanes.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ppsched.solver.model.ops import ops_from_text
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.model.schedule import parse_schedule
from ppsched.solver.sim.emit import schedule_from_orders
from ppsched.solver.sim.lane_rules import stated_time_violations, timing_violations
from ppsched.solver.sim.simulator import simulate


def _profile(**fields: Any) -> dict[str, Any]:
    return {"num_ranks": 1, "num_microbatches": 2, "t_f": 1.0, "t_b": 1.0, "t_w": 1.0,
            "m_b": 1.0, "m_w": 0.5, **fields}


def _stated(fields: dict[str, Any], order: str, moves: dict[int, tuple[float, float]],
            ) -> list[str]:
    """The violation kinds of `order`'s simulated schedule with some ops' times moved."""
    schedule = schedule_from_orders(parse_profile(_profile(**fields)), [ops_from_text(order)], "x")
    assert stated_time_violations(schedule) == []  # the simulator's own times keep them
    data = json.loads(schedule.model_dump_json())
    for i, (start, end) in moves.items():
        data["ranks"][0][i].update(start=start, end=end)
    return [v.kind for v in stated_time_violations(parse_schedule(data))]


OFFLOAD = "F0 O0 F1 B1 L0 B0 W0 W1"  # times: F0 0-1, O0 1-1.5, F1 1-2, B1 2-3, L0 2-2.5,
# B0 3-4 (k = 0.5)


@pytest.mark.parametrize(("fields", "order", "moves", "kind"), [
    # L0 made to end at 3.5, after its B starts at 3.
    ({"t_offload": 0.5}, OFFLOAD, {4: (3.0, 3.5)}, "late_reload"),
    # L0 moved onto O0's time: with one copy lane both directions share it.
    ({"t_offload": 0.5, "copy_lanes": 1}, OFFLOAD, {4: (1.2, 1.7)}, "lane_overlap"),
    # R0 started at 0.5, while its F (0-1) still runs.
    ({"t_r": 1.0}, "F0 F1 B1 W1 R0 B0 W0", {4: (0.5, 1.5)}, "recompute_early"),
    # R0 ending at 6.5, after its B starts at 5.
    ({"t_r": 1.0}, "F0 F1 B1 W1 R0 B0 W0", {4: (5.5, 6.5)}, "late_recompute"),
    # Two offloaded activations held on the host at once, over a limit of 1.
    # L0 (1.5-2) moved to 2.5-3, so that O1 (2-2.5) holds a second activation on the
    # host beside it, over a limit of 1.
    ({"t_offload": 0.5, "host_memory_limit": 1.0}, "F0 O0 L0 F1 O1 L1 B1 W1 B0 W0",
     {2: (2.5, 3.0)}, "host_memory"),
])
def test_each_rule_is_named_on_stated_times(fields: dict[str, Any], order: str,
                                            moves: dict[int, tuple[float, float]],
                                            kind: str) -> None:
    assert kind in _stated(fields, order, moves)


def test_two_lanes_run_a_d2h_and_an_h2d_at_once() -> None:
    # With copy_lanes 2 the moved L0 runs on h2d beside O0 on d2h: no overlap.
    assert "lane_overlap" not in _stated({"t_offload": 0.5}, OFFLOAD, {4: (1.2, 1.7)})


def _shared(**fields: Any) -> Any:
    data = {**_profile(num_ranks=2, num_microbatches=1, t_offload=2.0, copy_lanes=1),
            **fields}
    order = [ops_from_text("F0 O0 L0 B0 W0", 0), ops_from_text("F0 O0 L0 B0 W0", 1)]
    return simulate(parse_profile(data).problem, order)


def test_shared_host_link_runs_copies_first_come_first_served() -> None:
    own = _shared()
    shared = _shared(shared_host_link=[[0, 1]])
    assert own.ok and shared.ok, shared.violations

    def starts(sim: Any, r: int) -> list[float]:
        return [float(t) for t in sim.start[r]]

    # Own lanes: O0 1-3 and O1 2-4 overlap on two ranks' lanes; B of stage 1 at 6.
    assert starts(own, 0) == [0, 1, 3, 7, 8] and starts(own, 1) == [1, 2, 4, 6, 7]
    # One shared lane: O(0) 1-3; O(1) is ready at 2, before L(0) at 3, so it goes next
    # (3-5); L(0) 5-7 (ready at 3), then L(1) 7-9; B of stage 1 at 9, of stage 0 at 10.
    assert starts(shared, 0) == [0, 1, 5, 10, 11] and starts(shared, 1) == [1, 3, 7, 9, 10]
    assert timing_violations(parse_profile({**_profile(num_ranks=2, num_microbatches=1,
                                                       t_offload=2.0, copy_lanes=1),
                                            "shared_host_link": [[0, 1]]}).problem,
                             shared.order, shared.start, shared.end) == []


def test_shared_lanes_are_checked_across_the_group() -> None:
    problem = parse_profile({**_profile(num_ranks=2, num_microbatches=1, t_offload=2.0,
                                        copy_lanes=1), "shared_host_link": [[0, 1]]}).problem
    own = _shared()  # timed as if each rank had its own lane
    kinds = [v.kind for v in timing_violations(problem, own.order, own.start, own.end)]
    assert "lane_overlap" in kinds
