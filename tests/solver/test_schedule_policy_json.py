"""The schedule JSON with activation policies (DESIGN.md 6.3): O/L carry their copy lane,
a non-keep activation's ops their policy, both read back and checked; a schedule without
policies serialises byte for byte as before the fields existed (digests recorded on main
before issue 12's JSON fields, for every profile in profiles/ at 1p and 2p memory).

To accept a change of the keep-only JSON on purpose, run
``PPSCHED_UPDATE_DIGESTS=1 pytest tests/solver/test_schedule_policy_json.py`` and commit
``tests/solver/schedule_digests.json``.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.ops import ops_from_text
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.model.schedule import Schedule, parse_schedule
from ppsched.solver.sim.emit import schedule_from_orders
from ppsched.solver.solving.entry import solve

from tests.contract import contract_cost
from tests.solver.pins import rewrite_and_stop

ROOT = Path(__file__).resolve().parents[2]
DIGESTS = Path(__file__).parent / "schedule_digests.json"


def _at_memory(data: dict[str, Any], units: float) -> dict[str, Any]:
    m_b = data["m_b"] if isinstance(data["m_b"], int | float) else data["m_b"][0]
    return {**data, "memory_limit": units * data["num_ranks"] * m_b}


@functools.cache
def _keep_only_schedules() -> dict[str, Schedule | str]:
    """Every profile at 1p and 2p, by 1F1B and the heuristic, one chunk: the schedule,
    or the field a refusal names (1F1B above a hetero profile's limit)."""
    found: dict[str, Schedule | str] = {}
    for path in sorted((ROOT / "profiles").glob("*.json")):
        data = json.loads(path.read_text())
        for units in (1.0, 2.0):
            profile = parse_profile(_at_memory(data, units))
            for method in ("1f1b", "heuristic"):
                key = f"{path.name}@{units:g}p/{method}"
                try:
                    found[key] = solve(profile, method, layouts=((1, None),))
                except ProfileError as exc:
                    found[key] = f"refused: {exc.field}"
    return found


def _digests() -> dict[str, str]:
    found: dict[str, str] = {}
    for key, schedule in _keep_only_schedules().items():
        if isinstance(schedule, str):
            found[key] = schedule
            continue
        assert schedule.solver is not None
        # wall_s: the one figure that is not deterministic
        text = schedule.model_copy(update={"solver": schedule.solver.model_copy(
            update={"wall_s": 0.0})}).model_dump_json()
        assert '"lane"' not in text and '"policy"' not in text
        found[key] = hashlib.sha256(text.encode()).hexdigest()
    return found


def test_keep_only_schedules_serialise_as_before() -> None:
    # Regression pins: digests of the output on main before issue 12 (a change detector,
    # not evidence that the schedules are right; the contract checker's test below is).
    found = _digests()
    rewrite_and_stop(DIGESTS, json.dumps(found, indent=1, sort_keys=True) + "\n",
                     "PPSCHED_UPDATE_DIGESTS")
    assert found == json.loads(DIGESTS.read_text())


def test_keep_only_schedules_pass_the_contract_checker() -> None:
    # The digested schedules, re-timed by DESIGN.md alone, at the cost they report.
    checked = 0
    for key, schedule in _keep_only_schedules().items():
        if isinstance(schedule, str):
            assert key.endswith("/1f1b"), key  # only 1F1B may refuse a limit
            continue
        assert schedule.metrics is not None
        assert contract_cost(schedule) == pytest.approx(schedule.metrics.cost), key
        checked += 1
    assert checked >= 50  # 56 schedules, a few 1F1B refusals


def _one_stage(**fields: Any) -> dict[str, Any]:
    return {"num_ranks": 1, "num_microbatches": 2, "t_f": 1.0, "t_b": 1.0, "t_w": 1.0,
            "m_b": 1.0, "m_w": 0.5, **fields}


@pytest.mark.parametrize(("copy_lanes", "lanes"), [(2, ["d2h", "h2d"]), (1, ["copy"] * 2)])
def test_offload_ops_carry_lane_and_policy_and_read_back(copy_lanes: int,
                                                         lanes: list[str]) -> None:
    profile = parse_profile(_one_stage(t_offload=0.5, copy_lanes=copy_lanes))
    schedule = schedule_from_orders(profile, [ops_from_text("F0 O0 F1 B1 L0 B0 W0 W1")], "by-hand")
    data = json.loads(schedule.model_dump_json())
    ops = data["ranks"][0]
    assert [op["lane"] for op in ops if op["kind"] in ("O", "L")] == lanes
    assert all("lane" not in op for op in ops if op["kind"] not in ("O", "L"))
    # Every op of microbatch 0 says it is offloaded; microbatch 1 is kept (no field).
    assert {op["kind"]: op.get("policy") for op in ops if op["microbatch"] == 0} == \
        dict.fromkeys(["F", "O", "L", "B", "W"], "offload")
    assert all("policy" not in op for op in ops if op["microbatch"] == 1)
    back = parse_schedule(data)
    assert back.orders() == schedule.orders()
    assert back.model_dump_json() == schedule.model_dump_json()


def test_recompute_ops_carry_policy() -> None:
    profile = parse_profile(_one_stage(t_r=1.0, m_ckpt=0.25))
    schedule = schedule_from_orders(profile, [ops_from_text("F0 F1 B1 W1 R0 B0 W0")], "by-hand")
    ops = json.loads(schedule.model_dump_json())["ranks"][0]
    assert [op.get("policy") for op in ops] == ["recompute", None, None, None,
                                                "recompute", "recompute", "recompute"]
    assert all("lane" not in op for op in ops)


def _offload_json() -> dict[str, Any]:
    profile = parse_profile(_one_stage(t_offload=0.5))
    schedule = schedule_from_orders(profile, [ops_from_text("F0 O0 F1 B1 L0 B0 W0 W1")], "by-hand")
    data: dict[str, Any] = json.loads(schedule.model_dump_json())
    return data


@pytest.mark.parametrize(("position", "field", "value", "accepted"), [
    (1, "lane", "h2d", "'d2h' for an O with copy_lanes 2"),
    (1, "lane", "copy", "'d2h' for an O with copy_lanes 2"),
    (4, "lane", "d2h", "'h2d' for an L with copy_lanes 2"),
    (0, "policy", "recompute", "'offload' for stage 0 microbatch 0"),
    (2, "policy", "offload", "'keep' for stage 0 microbatch 1"),
])
def test_a_wrong_lane_or_policy_is_named(position: int, field: str, value: str,
                                         accepted: str) -> None:
    data = _offload_json()
    data["ranks"][0][position][field] = value
    with pytest.raises(ProfileError) as info:
        parse_schedule(data)
    assert info.value.field == f"ranks.0.{position}.{field}"
    assert info.value.value == value
    assert accepted in info.value.accepted


def test_a_lane_on_a_compute_op_is_refused() -> None:
    data = _offload_json()
    data["ranks"][0][0]["lane"] = "d2h"
    with pytest.raises(ProfileError, match="lane belongs to O and L ops only, not F"):
        parse_schedule(data)


def test_an_unknown_lane_names_the_field() -> None:
    data = _offload_json()
    data["ranks"][0][1]["lane"] = "pcie"
    with pytest.raises(ProfileError) as info:
        parse_schedule(data)
    assert info.value.field == "ranks.0.1.lane"
    assert "d2h" in info.value.accepted


def test_hand_written_copies_without_lane_are_read() -> None:
    data = _offload_json()
    for op in data["ranks"][0]:
        op.pop("lane", None)
        op.pop("policy", None)
    back = parse_schedule(data)
    assert [op.kind for op in back.ranks[0]][:2] == ["F", "O"]
