"""The V builds in rounds (`ppsched.solver.heuristic.v_rounds`): valid orders timed as the
simulator times them, and the later builds the same as built alone."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ppsched.solver.heuristic.chunked_timing import CANNOT_WIN
from ppsched.solver.heuristic.greedy import greedy_search
from ppsched.solver.heuristic.v_rounds import (
    CANDIDATES,
    RoundsKnobs,
    rounds_builds,
    rounds_timed,
)
from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.ops import Op
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import validate

from tests.solver.raced_builds import check_times_itself_as_the_simulator
from tests.solver.test_lookahead import v_profiles

KNOBS = [RoundsKnobs(f, b) for f in (True, False) for b in (True, False)]


@settings(max_examples=80, deadline=None)
@given(data=v_profiles(), knobs=st.sampled_from(KNOBS),
       objective=st.sampled_from(["cost", "makespan"]))
def test_rounds_orders_are_valid_and_timed_as_the_simulator(
        data: dict[str, Any], knobs: RoundsKnobs, objective: str) -> None:
    problem = parse_profile(data).problem
    check_times_itself_as_the_simulator(problem, objective, partial(
        rounds_timed, problem, knobs, objective))


@settings(max_examples=80, deadline=None)
@given(data=v_profiles(), objective=st.sampled_from(["cost", "makespan"]),
       races=st.lists(st.sampled_from([math.inf, -1.0, 0.0, 1e-6]), min_size=3,
                      max_size=3))
def test_each_later_build_is_the_build_made_alone(data: dict[str, Any], objective: str,
                                                  races: list[float]) -> None:
    # Each build raced against no incumbent, or against the first build's value (less,
    # the same, or a hair more: it stops at its first op over it, or runs to its end).
    problem = parse_profile(data).problem
    first = rounds_timed(problem, CANDIDATES[0], objective)
    base = first[1] if not isinstance(first, str) else 0.0

    def race(i: int) -> float:
        return races[i] if math.isinf(races[i]) else base + races[i]

    made = list(rounds_builds(problem, objective, race))
    assert [knobs for knobs, _ in made] == list(CANDIDATES)
    for i, (knobs, built) in enumerate(made):
        assert built == rounds_timed(problem, knobs, objective, race(i))


def _gpt(level: float) -> Any:
    one = parse_profile({"num_ranks": 8, "num_microbatches": 24, "t_f": 18.5, "t_b": 18.1,
                         "t_w": 9.3, "t_comm": 0.6, "m_b": 1.0, "m_w": 0.45,
                         "memory_limit": 8.0 * level})
    return with_chunks(one, 2, "v").problem


def _code(op: Op, p: int) -> str:
    kind, stage, j = op
    return (kind if stage < p else kind.lower()) + str(j)


def test_warm_up_and_steady_rounds_at_1p() -> None:
    # gpt1.5b-p8-m24 at 1p: rank 0 runs 2p-1 chunk-0 forwards while the first microbatch
    # goes down the V and back (not the 16 its memory holds), then F B W of chunk 1;
    # the last rank alternates its chunks from the start; in the drain the Bs go before
    # the Ws they held back (rank 7's last 14 ops: w16 W16 w17 W17 ...).
    problem = _gpt(1.0)
    built = rounds_timed(problem, CANDIDATES[0])
    assert not isinstance(built, str)
    orders, cost = built
    assert cost == pytest.approx(1185.15)
    rank0 = [_code(op, 8) for op in orders[0]]
    assert rank0[:21] == [f"F{j}" for j in range(15)] + ["f0", "b0", "w0", "f1", "b1", "w1"]
    rank7 = [_code(op, 8) for op in orders[7]]
    assert rank7[:6] == ["F0", "f0", "F1", "f1", "F2", "f2"]
    assert rank7[-16:] == [x for j in range(16, 24) for x in (f"w{j}", f"W{j}")]


def test_ws_are_deferred_where_memory_allows() -> None:
    # At 2p the rounds keep Ws back (memory up to 15.2 of 16 on the last rank) and run
    # them in the drain's bubbles: 1110.0, where running each W after its B (ZB-V) gives
    # 1188.4 and the greedy's builds 1126.25.
    problem = _gpt(2.0)
    built = rounds_timed(problem, CANDIDATES[0])
    assert not isinstance(built, str)
    orders, cost = built
    assert cost == pytest.approx(1110.0)
    sim = validate(problem, orders)
    assert max(sim.memory_peak) == pytest.approx(15.2)
    assert greedy_search(problem)[1:] == ("v-rounds", pytest.approx(1110.0))


def test_a_tight_limit_gives_no_build() -> None:
    # At 0.75p the warm-up cannot hold the forwards its catch-up phase needs.
    assert rounds_timed(_gpt(0.75), CANDIDATES[0]) in ("deadlock", "over the limit")
    assert rounds_timed(_gpt(1.0), CANDIDATES[0], incumbent=1000.0) == CANNOT_WIN


def test_only_v_placements() -> None:
    one = parse_profile({"num_ranks": 2, "num_microbatches": 4, "t_f": 1.0, "t_b": 1.0,
                         "t_w": 1.0, "t_comm": 0.0, "m_b": 1.0, "m_w": 0.5})
    with pytest.raises(ValueError, match="V placement"):
        rounds_timed(with_chunks(one, 2, "loop").problem, CANDIDATES[0])
