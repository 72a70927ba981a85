"""The stand-in timing with copy lanes (solver/sim/lanes.py, DESIGN.md 6.3): hand-computed
times, memory taken over time, host memory, and the rules an order with R/O/L can break."""

from __future__ import annotations

from typing import Any

import pytest
from ppsched.solver.model.ops import lane_of, ops_from_text, policy_of
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import simulate


def _one_stage(**fields: Any) -> Problem:
    data = {"num_ranks": 1, "num_microbatches": 2, "t_f": 1.0, "t_b": 1.0, "t_w": 1.0,
            "m_b": 1.0, "m_w": 0.5}
    data.update(fields)
    return parse_profile(data).problem


def test_offload_times_by_hand_with_the_issue_rule() -> None:
    problem = _one_stage(t_offload=0.5, host_memory_limit=1.0)
    sim = simulate(problem, [ops_from_text("F0 O0 F1 B1 L0 B0 W0 W1")])
    assert sim.ok and sim.metrics is not None
    starts = dict(zip(map(str, sim.order[0]), sim.start[0], strict=True))
    # O0 after F0's end; L0 issued at B1's start (2), after O0's end (1.5); B0 after B1
    # and after L0's end.
    assert (starts["0O0"], starts["0L0"], starts["0B0"]) == (1.0, 2.0, 3.0)
    assert sim.metrics.cost == 6.0  # copies do not extend the span
    # Device: F0, F1 -> 2; O0 frees 1 at 1.5; L0 adds 1 at 2 -> 2; peak 2.
    assert sim.memory_peak == (2.0,)


def test_memory_over_time_lets_an_offload_fit_below_keep() -> None:
    keep = _one_stage(num_microbatches=3, memory_limit=2.0)
    assert not simulate(keep, [ops_from_text("F0 F1 F2 B2 W2 B1 W1 B0 W0")]).ok
    # O0 frees F0's activation at 1.5, before F2 adds its own at 2; L0, issued at B1's
    # start (5), brings it back once W2 has freed room: the peak is 2.
    offload = _one_stage(num_microbatches=3, memory_limit=2.0, t_offload=0.5)
    sim = simulate(offload, [ops_from_text("F0 O0 F1 F2 B2 W2 B1 L0 W1 B0 W0")])
    assert sim.ok, sim.violations
    assert sim.memory_peak == (2.0,)


def test_host_memory_limit_is_checked() -> None:
    problem = _one_stage(t_offload=0.5, host_memory_limit=0.5)
    sim = simulate(problem, [ops_from_text("F0 O0 F1 B1 L0 B0 W0 W1")])
    assert [v.kind for v in sim.violations] == ["host_memory"]


def test_recompute_holds_the_checkpoint_then_adds_the_rest() -> None:
    problem = _one_stage(t_r=1.0, m_ckpt=0.25)
    sim = simulate(problem, [ops_from_text("F0 F1 B1 W1 R0 B0 W0")])
    assert sim.ok and sim.metrics is not None
    assert sim.memory_peak == (1.25,)  # F1 (1) + checkpoint of 0 (0.25)
    assert sim.metrics.cost == 7.0  # the R runs on the compute lane


@pytest.mark.parametrize(("fields", "order", "kind"), [
    ({"t_offload": 0.5, "t_r": 1.0}, "F0 O0 R0 L0 B0 W0 F1 B1 W1", "policy"),
    ({"t_offload": 0.5}, "F0 L0 B0 W0 F1 B1 W1", "policy"),
    ({}, "F0 R0 B0 W0 F1 B1 W1", "policy"),
    ({"t_r": 1.0}, "R0 F0 B0 W0 F1 B1 W1", "order"),
    ({"t_r": 1.0}, "F0 R0 B0 W0 F1 B1", "missing"),
])
def test_rules(fields: dict[str, Any], order: str, kind: str) -> None:
    sim = simulate(_one_stage(**fields), [ops_from_text(order)])
    assert kind in {v.kind for v in sim.violations}


def test_lanes_and_policies_of_an_order() -> None:
    assert lane_of("O", 2) == "d2h" and lane_of("L", 2) == "h2d"
    assert lane_of("O", 1) == lane_of("L", 1) == "copy"
    assert lane_of("R", 2) == "compute"
    order = [ops_from_text("F0 O0 F1 R1 L0 B0 W0 B1 W1")]
    assert policy_of(order) == {(0, 0): "offload", (0, 1): "recompute"}


def test_a_profile_without_policy_fields_offers_none() -> None:
    problem = _one_stage()
    assert not problem.can_recompute and not problem.can_offload
    assert problem.host_memory_limit == (float("inf"),)
