"""The simulator (DESIGN.md section 3): hand-timed schedules, every violation kind, and an
independent fixed-point re-timing of random valid orders."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ppsched.solver.model.errors import ScheduleInvalid
from ppsched.solver.model.ops import Op, ops_from_text
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.result import Simulation
from ppsched.solver.sim.simulator import simulate, validate


def _problem(**fields: Any) -> Problem:
    data = {"num_ranks": 2, "num_microbatches": 2, "t_f": 1.0, "t_b": 1.0, "t_w": 1.0,
            "m_b": 1.0, "m_w": 0.5}
    data.update(fields)
    return parse_profile(data).problem



def _kinds(sim: Simulation) -> list[str]:
    return [v.kind for v in sim.violations]


def _times(sim: Simulation, r: int) -> list[tuple[float | None, float | None]]:
    return list(zip(sim.start[r], sim.end[r], strict=True))


# A valid split-backward order for p = 2, m = 2 (stage r on rank r).
VALID_2x2 = [ops_from_text("0F0 0F1 0B0 0W0 0B1 0W1"), ops_from_text("1F0 1B0 1F1 1B1 1W0 1W1")]


# Timing by hand.


def test_two_rank_timing_by_hand() -> None:
    problem = _problem(t_f=[1.0, 2.0], t_b=[2.0, 3.0], t_w=1.0, t_comm=0.5)
    sim = validate(problem, VALID_2x2)
    # rank 0: F0 0-1, F1 1-2; B0 waits for 1B0 (ends 6.5) + 0.5; W0 right after its B;
    # B1 waits for 1B1 (ends 11.5) + 0.5.
    assert _times(sim, 0) == [(0, 1), (1, 2), (7, 9), (9, 10), (12, 14), (14, 15)]
    # rank 1: F0 waits for 0F0 (ends 1) + 0.5; B0 follows F0 on the same rank with no
    # latency; F1 (input at 2.5) waits for the rank; then B1, W0, W1 back to back.
    assert _times(sim, 1) == [(1.5, 3.5), (3.5, 6.5), (6.5, 8.5), (8.5, 11.5), (11.5, 12.5),
                              (12.5, 13.5)]
    metrics = sim.metrics
    assert metrics is not None
    assert metrics.span == (15.0, 12.0)
    assert metrics.cost == 15.0
    assert metrics.makespan == 15.0
    assert metrics.busy == (8.0, 12.0)
    assert problem.simple_lower_bound == 12.0  # rank 1's 2 * (2 + 3 + 1)
    assert 12.0 <= metrics.lower_bound <= metrics.cost
    assert metrics.bubble_rate == pytest.approx((15.0 - 12.0) / 15.0)
    assert metrics.idle_fraction == pytest.approx((7 / 15, 0.0))
    # rank 0: F F -> 2; rank 1: F (1) B (0.5) F (1.5) -> 1.5.
    assert metrics.peak_memory == (2.0, 1.5)
    assert metrics.objective("cost") == 15.0


def test_fused_backward_timing_by_hand() -> None:
    problem = _problem(t_b=2.0, t_w=1.0, t_comm=1.0)
    order = [ops_from_text("0F0 0F1 0BW0 0BW1"), ops_from_text("1F0 1BW0 1F1 1BW1")]
    sim = validate(problem, order)
    # 1F0 at 0+1+1 = 2; 1BW0 takes t_b + t_w = 3; 1F1 ready at 3, rank free at 6.
    assert _times(sim, 1) == [(2, 3), (3, 6), (6, 7), (7, 10)]
    # 0BW0 waits for 1BW0 (ends 6) + 1; 0BW1 for 1BW1 (ends 10) + 1.
    assert _times(sim, 0) == [(0, 1), (1, 2), (7, 10), (11, 14)]
    assert sim.metrics is not None
    assert sim.metrics.span == (14.0, 8.0)
    assert sim.metrics.makespan == 14.0
    assert sim.metrics.peak_memory == (2.0, 1.0)  # BW frees m_b at once


def test_makespan_differs_from_cost() -> None:
    # rank 1 ends last but started late: its span is short, the makespan is not.
    problem = _problem(num_microbatches=1, t_f=[1.0, 5.0], t_b=[1.0, 5.0], t_w=[1.0, 5.0],
                       t_comm=0.0)
    sim = validate(problem, [ops_from_text("0F0 0B0 0W0"), ops_from_text("1F0 1B0 1W0")])
    assert _times(sim, 0) == [(0, 1), (11, 12), (12, 13)]
    assert _times(sim, 1) == [(1, 6), (6, 11), (11, 16)]
    assert sim.metrics is not None
    assert sim.metrics.span == (13.0, 15.0)
    assert sim.metrics.cost == 15.0
    assert sim.metrics.makespan == 16.0
    assert sim.metrics.objective("makespan") == 16.0


def test_v_placement_comm_only_between_ranks() -> None:
    # p = 2, v = 2, V: stages 0 and 3 on rank 0, stages 1 and 2 on rank 1. The boundary
    # (1, 2) lies inside rank 1: its t_comm of 100 must never be paid.
    problem = _problem(num_microbatches=1, num_chunks=2, placement="v", t_comm=[10, 100, 10])
    order = [ops_from_text("0F0 3F0 3B0 0B0 3W0 0W0"), ops_from_text("1F0 2F0 2B0 1B0 2W0 1W0")]
    sim = validate(problem, order)
    # 1F0 at 1 + 10; 2F0 straight after on rank 1; 3F0 at 13 + 10; 3B0 after 3F0 (same
    # rank, last stage); 2B0 at 25 + 10; 1B0 straight after; 0B0 at 37 + 10.
    assert _times(sim, 1) == [(11, 12), (12, 13), (35, 36), (36, 37), (37, 38), (38, 39)]
    assert _times(sim, 0) == [(0, 1), (23, 24), (24, 25), (47, 48), (48, 49), (49, 50)]
    assert sim.metrics is not None
    assert sim.metrics.span == (50.0, 28.0)
    assert sim.metrics.peak_memory == (2.0, 2.0)  # both stages' F held on each rank


def test_loop_placement_comm_on_every_boundary() -> None:
    # p = 2, v = 2, loop: stages 0, 2 on rank 0; 1, 3 on rank 1. Every boundary crosses.
    problem = _problem(num_microbatches=1, num_chunks=2, placement="loop", t_comm=[1, 2, 3])
    order = [ops_from_text("0F0 2F0 2BW0 0BW0"), ops_from_text("1F0 3F0 3BW0 1BW0")]
    sim = validate(problem, order)
    # 0F0 0-1, 1F0 2-3, 2F0 5-6, 3F0 9-10, 3BW0 10-12, 2BW0 15-17, 1BW0 19-21, 0BW0 22-24.
    assert _times(sim, 0) == [(0, 1), (5, 6), (15, 17), (22, 24)]
    assert _times(sim, 1) == [(2, 3), (9, 10), (10, 12), (19, 21)]


def test_mixed_fused_and_split_backward_across_microbatches() -> None:
    # BW for one microbatch and B/W for another is valid; B waits on the fused BW above.
    problem = _problem(t_comm=0.0)
    order = [ops_from_text("0F0 0F1 0B0 0W0 0BW1"), ops_from_text("1F0 1BW0 1F1 1B1 1W1")]
    sim = validate(problem, order)
    # 1BW0 ends at 4 (BW = 2 units); 0B0 waits for it.
    assert _times(sim, 1) == [(1, 2), (2, 4), (4, 5), (5, 6), (6, 7)]
    assert _times(sim, 0) == [(0, 1), (1, 2), (4, 5), (5, 6), (6, 8)]


# Violations, one kind at a time.


@pytest.mark.parametrize(("order", "kind", "rank", "position"), [
    ([ops_from_text("0F0 0F1 0B0 0W0 0B1 0W1"),
      [*ops_from_text("1F0 1B0 1F1 1B1 1W0 1W1"), Op("X", 1, 0)]],
     "unknown_op", 1, 6),
    ([ops_from_text("0F0 0F1 0B0 0W0 0B1 0W1 0F2"), ops_from_text("1F0 1B0 1F1 1B1 1W0 1W1")],
     "unknown_op", 0, 6),
    ([ops_from_text("0F0 0F1 0B0 0W0 0B1 0W1 7F0"), ops_from_text("1F0 1B0 1F1 1B1 1W0 1W1")],
     "unknown_op", 0, 6),
    ([ops_from_text("0F0 1F0 0F1 0B0 0W0 0B1 0W1"), ops_from_text("1B0 1F1 1B1 1W0 1W1")],
     "wrong_rank", 0, 1),
    ([ops_from_text("0F0 0F1 0B0 0W0 0B1 0W1"), ops_from_text("1F0 1B0 1F1 1B1 1W0 1W1 1W0")],
     "duplicate", 1, 6),
    ([ops_from_text("0F0 0F1 0B0 0W0 0B1 0W1"), ops_from_text("1F0 1B0 1F1 1B1 1W0 1BW1")],
     "mixed_backward", 1, 5),
], ids=["unknown-kind", "unknown-microbatch", "unknown-stage", "wrong-rank", "duplicate",
        "mixed-bw"])
def test_violation_kind_and_place(order: list[list[Op]], kind: str, rank: int,
                                  position: int) -> None:
    sim = simulate(_problem(), order)
    found = [v for v in sim.violations if v.kind == kind]
    assert len(found) == 1
    assert (found[0].rank, found[0].position) == (rank, position)
    assert not sim.ok
    assert sim.metrics is None


def test_wrong_rank_op_is_also_missing_from_its_rank() -> None:
    sim = simulate(_problem(), [ops_from_text("0F0 1F0 0F1 0B0 0W0 0B1 0W1"),
                                ops_from_text("1B0 1F1 1B1 1W0 1W1")])
    assert sorted(_kinds(sim)) == ["missing", "wrong_rank"]
    (missing,) = [v for v in sim.violations if v.kind == "missing"]
    assert "1F0" in missing.message
    assert missing.rank == 1


@pytest.mark.parametrize(("drop", "missing"), [
    ("0F1", ["0F1"]), ("1W0", ["1W0"]), ("0B1", ["0B1"]),
])
def test_missing_op_is_named(drop: str, missing: list[str]) -> None:
    order = [[op for op in ops if str(op) != drop] for ops in VALID_2x2]
    sim = simulate(_problem(), order)
    found = [v for v in sim.violations if v.kind == "missing"]
    assert [v.message.split()[0] for v in found] == missing
    assert sim.metrics is None


def test_missing_backward_entirely() -> None:
    order = [ops_from_text("0F0 0F1 0B0 0W0 0B1 0W1"), ops_from_text("1F0 1B0 1F1 1W0")]
    sim = simulate(_problem(), order)
    missing = sorted(v.message.split()[0] for v in sim.violations if v.kind == "missing")
    assert missing == ["1B1", "1W1"]


def test_op_waiting_on_a_missing_op_is_not_a_deadlock() -> None:
    # Without 1B0, rank 0 blocks at 0B0 forever: reported as the missing op only.
    order = [ops_from_text("0F0 0F1 0B0 0W0 0B1 0W1"), ops_from_text("1F0 1F1 1B1 1W0 1W1")]
    sim = simulate(_problem(), order)
    assert _kinds(sim) == ["missing"]
    assert sim.metrics is None
    assert sim.start[0][2] is None


def test_wrong_number_of_ranks() -> None:
    sim = simulate(_problem(), [*VALID_2x2, []])
    assert "wrong_rank" in _kinds(sim)
    assert sim.metrics is None
    sim = simulate(_problem(), VALID_2x2[:1])
    assert "wrong_rank" in _kinds(sim)
    assert "missing" in _kinds(sim)


def test_memory_over_limit_flagged_at_first_op_over() -> None:
    # GPipe order with a limit of 2.5 activations: the third F on each rank breaks it.
    problem = _problem(num_microbatches=4, memory_limit=2.5, m_w=1.0)
    order = [[Op("F", r, j) for j in range(4)] + [Op("BW", r, j) for j in range(4)]
             for r in range(2)]
    sim = simulate(problem, order)
    found = [(v.kind, v.rank, v.position) for v in sim.violations]
    assert found == [("memory", 0, 2), ("memory", 1, 2)]
    assert "3 > memory_limit 2.5" in sim.violations[0].message
    # Memory alone still gets figures.
    assert sim.metrics is not None
    assert sim.metrics.peak_memory == (4.0, 4.0)


def test_memory_per_rank_limit_and_held_w() -> None:
    # m_w stays held until W: F F B B holds 2 * m_w after the Bs.
    problem = _problem(m_b=1.0, m_w=0.75, memory_limit=[2.0, 1.2])
    order = [ops_from_text("0F0 0F1 0B0 0B1 0W0 0W1"), ops_from_text("1F0 1B0 1F1 1B1 1W0 1W1")]
    sim = simulate(problem, order)
    # rank 1: F 1, B 0.75, F 1.75 (> 1.2 at position 2).
    assert [(v.kind, v.rank, v.position) for v in sim.violations] == [("memory", 1, 2)]
    assert sim.memory_peak == (2.0, 1.75)


def _deadlocked_pair() -> list[list[Op]]:
    # rank 0 runs 0B0 before 0F1; rank 1 runs 1F1 before 1B0: 0B0 needs 1B0, which is
    # behind 1F1, which needs 0F1, which is behind 0B0.
    return [ops_from_text("0F0 0B0 0F1 0B1 0W0 0W1"), ops_from_text("1F0 1F1 1B0 1B1 1W0 1W1")]


def test_deadlock_names_the_cycle() -> None:
    sim = simulate(_problem(), _deadlocked_pair())
    deadlocks = [v for v in sim.violations if v.kind == "deadlock"]
    assert {(v.rank, v.position) for v in deadlocks} == {(0, 1), (1, 1)}
    text = " ".join(v.message for v in deadlocks)
    for name in ("0B0", "1B0", "1F1", "0F1"):
        assert name in text
    assert set(_kinds(sim)) == {"deadlock"}
    assert sim.metrics is None
    # What could be timed before the cycle closed was.
    assert sim.end[0][0] == 1.0
    assert sim.start[0][1] is None


def test_deadlock_on_one_rank() -> None:
    # W before its own B can never run.
    sim = simulate(_problem(), [ops_from_text("0F0 0F1 0W0 0B0 0B1 0W1"), VALID_2x2[1]])
    deadlocks = [v for v in sim.violations if v.kind == "deadlock"]
    assert len(deadlocks) == 1
    assert "0W0" in deadlocks[0].message and "0B0" in deadlocks[0].message


def test_big_deadlock_returns_promptly() -> None:
    # p = 8, m = 64: 1F1B with the warm-ups reversed (rank 0 starts its backward at
    # once while the last rank runs all its forwards first) deadlocks along the chain.
    p, m = 8, 64
    problem = _problem(num_ranks=p, num_microbatches=m)
    order = []
    for r in range(p):
        warmup = r  # wrong: warm-ups must not grow down the pipeline
        ops = [Op("F", r, j) for j in range(warmup + 1)]
        for j in range(m):
            ops.append(Op("BW", r, j))
            if warmup + 1 + j < m:
                ops.append(Op("F", r, warmup + 1 + j))
        order.append(ops)
    began = time.perf_counter()
    sim = simulate(problem, order)
    assert time.perf_counter() - began < 2.0
    assert "deadlock" in _kinds(sim)
    assert sim.metrics is None


def test_validate_raises_with_grid() -> None:
    order = [ops_from_text("0F0 0F1 0B0 0W0 0B1 0W1 0W1"), ops_from_text("1F0 1B0 1F1 1B1 1W0")]
    with pytest.raises(ScheduleInvalid) as info:
        validate(_problem(), order)
    error = info.value
    assert sorted(v.kind for v in error.violations) == ["duplicate", "missing"]
    assert "<-- ERROR HERE" in error.grid
    assert "appears twice" in error.grid
    assert "2 violations" in str(error)
    assert isinstance(error, ValueError)


def test_validate_deadlock_grid_marks_both_ranks() -> None:
    with pytest.raises(ScheduleInvalid) as info:
        validate(_problem(), _deadlocked_pair())
    rows = [line for line in info.value.grid.splitlines() if "<-- ERROR HERE" in line]
    assert len(rows) == 2


def test_validate_memory_only_still_raises() -> None:
    problem = _problem(num_microbatches=3, memory_limit=1.5)
    order = [[Op("F", r, j) for j in range(3)] + [Op("BW", r, j) for j in range(3)]
             for r in range(2)]
    with pytest.raises(ScheduleInvalid) as info:
        validate(problem, order)
    assert {v.kind for v in info.value.violations} == {"memory"}


# An independent reference: the fixed point of the timing equations.


def _reference_dependency(problem: Problem, op: Op, fused: set[tuple[int, int]]) -> Op | None:
    kind, s, j = op
    if kind == "F":
        return Op("F", s - 1, j) if s > 0 else None
    if kind == "W":
        return Op("B", s, j)
    if s == problem.num_stages - 1:
        return Op("F", s, j)
    return Op("BW" if (s + 1, j) in fused else "B", s + 1, j)


def _reference_times(problem: Problem, order: list[list[Op]],
                     fused: set[tuple[int, int]]) -> dict[Op, tuple[float, float]]:
    """Iterate start = max(previous end on the rank, dependency end + comm) to a fixed
    point, starting from all zeros (the least fixed point is list scheduling's timing)."""
    durations = {"F": problem.t_f, "B": problem.t_b, "W": problem.t_w}
    start = {op: 0.0 for ops in order for op in ops}

    def length(op: Op) -> float:
        if op.kind == "BW":
            return problem.t_b[op.stage] + problem.t_w[op.stage]
        return durations[op.kind][op.stage]

    for _ in range(len(start) + 2):
        changed = False
        for r, ops in enumerate(order):
            for i, op in enumerate(ops):
                begin = 0.0
                if i > 0:
                    begin = start[ops[i - 1]] + length(ops[i - 1])
                dep = _reference_dependency(problem, op, fused)
                if dep is not None:
                    same = problem.stage_to_rank[dep.stage] == r
                    comm = 0.0 if same else problem.t_comm[min(dep.stage, op.stage)]
                    begin = max(begin, start[dep] + length(dep) + comm)
                if begin != start[op]:
                    start[op], changed = begin, True
        if not changed:
            return {op: (t, t + length(op)) for op, t in start.items()}
    raise AssertionError("no fixed point: the order deadlocks")


def _random_order(problem: Problem, rng: random.Random,
                  ) -> tuple[list[list[Op]], set[tuple[int, int]]]:
    """A random topological interleaving of all ops, cut into per-rank orders."""
    S, m = problem.num_stages, problem.num_microbatches
    fused = {(s, j) for s in range(S) for j in range(m) if rng.random() < 0.3}
    ops = [Op("F", s, j) for s in range(S) for j in range(m)]
    for s in range(S):
        for j in range(m):
            ops += [Op("BW", s, j)] if (s, j) in fused else [Op("B", s, j), Op("W", s, j)]
    pending = set(ops)
    done: set[Op] = set()
    order: list[list[Op]] = [[] for _ in range(problem.num_ranks)]
    while pending:
        ready = sorted(op for op in pending
                       if (dep := _reference_dependency(problem, op, fused)) is None
                       or dep in done)
        op = rng.choice(ready)
        pending.remove(op)
        done.add(op)
        order[problem.stage_to_rank[op.stage]].append(op)
    return order, fused


times_st = st.floats(0.0, 5.0, allow_nan=False).map(lambda x: round(x, 2))


@st.composite
def random_problems(draw: st.DrawFn) -> Problem:
    p = draw(st.integers(1, 4))
    v = draw(st.sampled_from([1, 1, 2]))
    placement = draw(st.sampled_from(["loop", "v"])) if v == 2 else None
    S = p * v
    per_stage = st.one_of(times_st, st.lists(times_st, min_size=S, max_size=S))
    comm = st.one_of(times_st, st.lists(times_st, min_size=S - 1, max_size=S - 1))
    m_b = draw(st.lists(times_st, min_size=S, max_size=S))
    m_w = [round(x * draw(st.floats(0.0, 1.0)), 2) for x in m_b]
    return parse_profile({
        "num_ranks": p, "num_microbatches": draw(st.integers(1, 4)), "num_chunks": v,
        "placement": placement, "t_f": draw(per_stage), "t_b": draw(per_stage),
        "t_w": draw(per_stage), "t_comm": draw(comm), "m_b": m_b, "m_w": m_w,
    }).problem


@settings(max_examples=150, deadline=None)
@given(problem=random_problems(), rng=st.randoms(use_true_random=False))
def test_simulator_equals_fixed_point_reference(problem: Problem, rng: random.Random) -> None:
    order, fused = _random_order(problem, rng)
    sim = simulate(problem, order)
    assert sim.ok, sim.violations
    reference = _reference_times(problem, order, fused)
    for r, ops in enumerate(order):
        for i, op in enumerate(ops):
            assert (sim.start[r][i], sim.end[r][i]) == pytest.approx(reference[op], abs=1e-9)
    assert sim.metrics is not None
    spans = [reference[ops[-1]][1] - reference[ops[0]][0] for ops in order if ops]
    assert sim.metrics.cost == pytest.approx(max(spans), abs=1e-9)
    first = min(reference[ops[0]][0] for ops in order if ops)
    last = max(reference[ops[-1]][1] for ops in order if ops)
    assert sim.metrics.makespan == pytest.approx(last - first, abs=1e-9)
    assert sim.metrics.cost >= problem.simple_lower_bound - 1e-9


@settings(max_examples=100, deadline=None)
@given(problem=random_problems(), rng=st.randoms(use_true_random=False))
def test_peak_memory_is_largest_prefix_sum(problem: Problem, rng: random.Random) -> None:
    order, _ = _random_order(problem, rng)
    sim = simulate(problem, order)
    delta = {"F": lambda s: problem.m_b[s], "B": lambda s: problem.m_w[s] - problem.m_b[s],
             "W": lambda s: -problem.m_w[s], "BW": lambda s: -problem.m_b[s]}
    for r, ops in enumerate(order):
        held = peak = 0.0
        for op in ops:
            held += delta[op.kind](op.stage)
            peak = max(peak, held)
        assert sim.memory_peak[r] == pytest.approx(peak, abs=1e-9)
        assert held == pytest.approx(0.0, abs=1e-9)  # everything is freed at the end


# Float edge cases.


@pytest.mark.parametrize("m_w", [1e-310, 5e-324, 1e-300])
def test_tiny_m_w_does_not_crash_the_bound(m_w: float) -> None:
    # The memory-aware bound divides by m_w; a subnormal one once overflowed to inf.
    problem = _problem(num_ranks=1, num_microbatches=3, m_b=1.0, m_w=m_w, memory_limit=1.0)
    sim = simulate(problem, [ops_from_text("0F0 0B0 0W0 0F1 0B1 0W1 0F2 0B2 0W2")])
    assert sim.ok
    assert sim.metrics is not None
    assert sim.metrics.lower_bound <= sim.metrics.cost


def test_bubble_rate_never_negative() -> None:
    # The span sums op times one by one (1 + 1 + 0.1 + ...), the busy time is
    # m * (t_f + t_b + t_w): they differ in the last bit, never below zero.
    problem = _problem(num_ranks=1, t_w=0.1)
    sim = validate(problem, [ops_from_text("0F0 0B0 0W0 0F1 0B1 0W1")])
    assert sim.metrics is not None
    assert sim.metrics.bubble_rate >= 0.0
    assert min(sim.metrics.idle_fraction) >= 0.0
    assert sim.metrics.bubble_rate == pytest.approx(0.0, abs=1e-12)
