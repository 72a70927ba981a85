"""The independent checks behind the regression pins of `tests/solver/pins.py`: a
committed witness schedule, the closed-form bounds of model/bounds.py, and the contract
checker of ../shared/contract-checker (which imports nothing of ppsched)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from ppsched.solver.heuristic.greedy import greedy_search
from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.ops import Op
from ppsched.solver.model.profile import Profile, parse_profile
from ppsched.solver.render.torch_csv import parse_torch_csv
from ppsched.solver.sim.emit import schedule_from_orders
from ppsched.solver.sim.simulator import simulate
from ppsched.solver.solving.entry import solve

from tests.contract import contract_cost
from tests.solver.pins import (
    PINNED_2026_11_27_FIFO_OPTIMUM_LIMIT_6,
    PINNED_2026_11_27_KEEP_ONLY_2P,
    PINNED_2026_11_27_RANK0_RELAXATION_LIMIT_6,
    PINNED_2026_11_27_V_SEARCH_LIMIT_4,
    PINNED_2026_11_27_V_SEARCH_LIMIT_6,
    PROFILE,
    WITNESS_LIMIT_6,
)
from tests.solver.test_bounds import _fifo

ROOT = Path(__file__).resolve().parents[2]
V_SEARCH = {6.0: PINNED_2026_11_27_V_SEARCH_LIMIT_6, 4.0: PINNED_2026_11_27_V_SEARCH_LIMIT_4}


def _posted(limit: float) -> dict[str, Any]:
    data = json.loads((ROOT / "profiles" / f"{PROFILE}.json").read_text())
    return {**data, "memory_limit": limit}


def test_the_limit_6_witness_is_a_fifo_schedule_at_the_pinned_optimum() -> None:
    problem = parse_profile(_posted(6)).problem
    orders = parse_torch_csv(WITNESS_LIMIT_6.read_text())
    assert _fifo(tuple(map(tuple, orders)))  # F, B and W in microbatch order per stage
    sim = simulate(problem, orders)  # memory limit 6 included
    assert sim.ok, sim.violations[:3]
    assert sim.metrics is not None
    assert sim.metrics.cost == pytest.approx(PINNED_2026_11_27_FIFO_OPTIMUM_LIMIT_6,
                                             abs=1e-6)
    # The closed forms and the rank-0 relaxation pin lie below what the witness reaches.
    assert lower_bound(problem) < PINNED_2026_11_27_RANK0_RELAXATION_LIMIT_6 \
        <= sim.metrics.cost + 1e-6


def test_the_limit_6_witness_passes_the_contract_checker() -> None:
    profile = parse_profile(_posted(6))
    orders = parse_torch_csv(WITNESS_LIMIT_6.read_text())
    schedule = schedule_from_orders(profile, orders, "witness")
    assert contract_cost(schedule) == pytest.approx(PINNED_2026_11_27_FIFO_OPTIMUM_LIMIT_6,
                                                    abs=1e-6)


def test_a_witness_that_breaks_the_limit_is_caught() -> None:
    # The witness check can fail: at a limit of 5 the same orders hold too much memory.
    problem = parse_profile(_posted(5)).problem
    assert not simulate(problem, parse_torch_csv(WITNESS_LIMIT_6.read_text())).ok


@functools.cache
def _v_search(limit: float) -> tuple[Profile, list[list[Op]], float]:
    profile = with_chunks(parse_profile(_posted(limit)), 2, "v")
    orders, _, value = greedy_search(profile.problem)
    return profile, orders, value


@pytest.mark.parametrize("limit", sorted(V_SEARCH))
def test_v_search_pins_above_the_v_bound(limit: float) -> None:
    profile, _, value = _v_search(limit)
    assert lower_bound(profile.problem) <= value <= V_SEARCH[limit] + 1e-6


@pytest.mark.parametrize("limit", sorted(V_SEARCH))
def test_v_search_pins_retime_by_the_contract_checker(limit: float) -> None:
    profile, orders, value = _v_search(limit)
    schedule = schedule_from_orders(profile, orders, "v-search")
    # Judged against the posted one-chunk profile: the V cut must be fair (DESIGN.md 6.6).
    assert contract_cost(schedule, _posted(limit)) == pytest.approx(value, abs=1e-6)


@functools.cache
def _keep_only_2p() -> Any:
    return solve(parse_profile(_posted(16)), "heuristic", layouts=((1, None),))


def test_keep_only_2p_pin_is_todays_heuristic_above_the_bound() -> None:
    schedule = _keep_only_2p()
    assert schedule.metrics is not None
    assert schedule.metrics.cost == pytest.approx(PINNED_2026_11_27_KEEP_ONLY_2P, abs=1e-6)
    assert lower_bound(parse_profile(_posted(16)).problem) < PINNED_2026_11_27_KEEP_ONLY_2P


def test_keep_only_2p_pin_retimes_by_the_contract_checker() -> None:
    assert contract_cost(_keep_only_2p()) == pytest.approx(PINNED_2026_11_27_KEEP_ONLY_2P,
                                                           abs=1e-6)
