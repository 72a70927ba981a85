"""The profile (DESIGN.md section 2): bad input refused by name, good input resolved."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import Profile, load_profile, parse_profile

from tests.needs import shared_path

PROFILES = Path(__file__).resolve().parents[2] / "profiles"
PROFILE_FILES = sorted(PROFILES.glob("*.json"))

# p = 4, v = 1: four stages, three stage boundaries.
BASE: dict[str, Any] = {"num_ranks": 4, "num_microbatches": 8, "t_f": 1.0, "t_b": 2.0,
                        "t_w": 1.0, "t_comm": 0.0, "m_b": 1.0, "m_w": 0.5}


def _with(**changes: Any) -> dict[str, Any]:
    """BASE with fields changed; a value of ``...`` removes the field."""
    data = dict(BASE)
    for key, value in changes.items():
        if value is ...:
            data.pop(key)
        else:
            data[key] = value
    return data


def _refused(data: Any) -> ProfileError:
    with pytest.raises(ProfileError) as info:
        parse_profile(data)
    return info.value


# (case id, profile, field the error names, text of the value the message shows)
BAD_PROFILES = [
    # Negative and non-finite numbers.
    ("t_f negative", _with(t_f=-1.0), "t_f", "-1.0"),
    ("t_b negative", _with(t_b=-0.5), "t_b", "-0.5"),
    ("t_w negative", _with(t_w=-2), "t_w", "-2"),
    ("t_comm negative", _with(t_comm=-0.1), "t_comm", "-0.1"),
    ("m_b negative", _with(m_b=-1.0), "m_b", "-1.0"),
    ("m_w negative", _with(m_w=-0.25), "m_w", "-0.25"),
    ("t_b element negative", _with(t_b=[1.0, 1.0, -3.0, 1.0]), "t_b[2]", "-3.0"),
    ("t_comm element negative", _with(t_comm=[0.0, -1.0, 0.0]), "t_comm[1]", "-1.0"),
    ("t_f infinite", _with(t_f=math.inf), "t_f", "inf"),
    ("t_w nan", _with(t_w=math.nan), "t_w", "nan"),
    # Lists of the wrong length: p*v per stage, p*v-1 per boundary.
    ("t_f short list", _with(t_f=[1.0, 1.0, 1.0]), "t_f", "(got 3)"),
    ("t_b long list", _with(t_b=[1.0] * 5), "t_b", "(got 5)"),
    ("t_w empty list", _with(t_w=[]), "t_w", "(got 0)"),
    ("m_b short list", _with(m_b=[1.0, 1.0]), "m_b", "(got 2)"),
    ("m_w long list", _with(m_w=[0.5] * 8), "m_w", "(got 8)"),
    ("t_comm one per stage", _with(t_comm=[0.1] * 4), "t_comm", "(got 4)"),
    ("t_comm with v=2 needs 7", _with(num_chunks=2, placement="loop", t_comm=[0.1] * 8),
     "t_comm", "(got 8)"),
    ("t_f with v=2 needs 8", _with(num_chunks=2, placement="v", t_f=[1.0] * 4),
     "t_f", "(got 4)"),
    # Unknown and missing fields.
    ("unknown field", _with(t_x=1.0), "t_x", "1.0"),
    ("misspelt field", _with(num_rank=4), "num_rank", "4"),
    ("missing t_f", _with(t_f=...), "t_f", "missing"),
    ("missing num_ranks", _with(num_ranks=...), "num_ranks", "missing"),
    ("missing m_w", _with(m_w=...), "m_w", "missing"),
    # Memory limits below one microbatch's activations (sum of the rank's stages' m_b).
    ("limit below m_b", _with(memory_limit=0.5), "memory_limit", "0.5"),
    ("limit below a list m_b", _with(m_b=[1.0, 3.0, 1.0, 1.0], memory_limit=2.0),
     "memory_limit", "2.0"),
    ("limit below two chunks", _with(num_chunks=2, placement="loop", memory_limit=1.5),
     "memory_limit", "1.5"),
    ("limit below V chunks", _with(num_chunks=2, placement="v", m_b=[1.0] * 7 + [2.5],
                                   memory_limit=3.0), "memory_limit", "3.0"),
    ("per-rank limit too low", _with(memory_limit=[4.0, 0.5, 4.0, 4.0]),
     "memory_limit[1]", "0.5"),
    ("per-rank limit short", _with(memory_limit=[4.0, 4.0, 4.0]), "memory_limit", "(got 3)"),
    ("per-rank limit long", _with(memory_limit=[4.0] * 5), "memory_limit", "(got 5)"),
    ("limit zero", _with(memory_limit=0), "memory_limit", "0"),
    ("limit negative", _with(memory_limit=-4.0), "memory_limit", "-4.0"),
    # Chunks and placement.
    ("chunks without placement", _with(num_chunks=2), "placement", "None"),
    ("v placement with 3 chunks", _with(num_chunks=3, placement="v"), "placement", "'v'"),
    ("unknown placement", _with(num_chunks=2, placement="zigzag"), "placement", "'zigzag'"),
    ("zero chunks", _with(num_chunks=0), "num_chunks", "0"),
    # Counts.
    ("zero ranks", _with(num_ranks=0), "num_ranks", "0"),
    ("zero microbatches", _with(num_microbatches=0), "num_microbatches", "0"),
    ("fractional ranks", _with(num_ranks=2.5), "num_ranks", "2.5"),
    # Values that are not numbers.
    ("t_f a word", _with(t_f="fast"), "t_f", "'fast'"),
    ("t_b null", _with(t_b=None), "t_b", "None"),
    ("t_w list with a word", _with(t_w=[1.0, "x", 1.0, 1.0]), "t_w", "'x'"),
    ("t_comm an object", _with(t_comm={"a": 1}), "t_comm", "{'a': 1}"),
    ("m_b a matrix of too short rows", _with(m_b=[[1.0]] * 4), "m_b[0]", "[1.0]"),
    ("memory_limit a word", _with(memory_limit="lots"), "memory_limit", "'lots'"),
    ("num_ranks a word", _with(num_ranks="four"), "num_ranks", "'four'"),
    ("name a number", _with(name=5), "name", "5"),
    ("not an object", [1, 2], "profile", "[1, 2]"),
    ("null profile", None, "profile", "None"),
]


@pytest.mark.parametrize(("data", "field", "value_text"),
                         [pytest.param(d, f, v, id=i) for i, d, f, v in BAD_PROFILES])
def test_bad_profile_is_refused_naming_field_and_value(data: Any, field: str,
                                                       value_text: str) -> None:
    error = _refused(data)
    assert error.field == field
    assert f"'{field}'" in str(error)
    assert value_text in str(error)
    assert "expected" in str(error)  # and what would be accepted


def test_bad_profile_error_is_a_value_error() -> None:
    assert isinstance(_refused(_with(t_f=-1.0)), ValueError)


def test_limit_error_says_what_the_rank_needs() -> None:
    error = _refused(_with(num_chunks=2, placement="loop", memory_limit=1.5))
    assert ">= 2" in str(error)  # two stages of m_b = 1 on every rank


@pytest.mark.parametrize(("field", "value"), [
    ("t_f", "1.5"), ("t_comm", "0"), ("m_w", ["0.5", 0.5, 0.5, 0.5]), ("num_ranks", "4"),
    ("memory_limit", "8"),
])
def test_numeric_string_is_refused(field: str, value: Any) -> None:
    # pydantic's lax mode would read the JSON string "1.5" as the number 1.5.
    error = _refused(_with(**{field: value}))
    assert error.field == field
    assert repr(value) in str(error)


def test_integers_are_numbers() -> None:
    problem = parse_profile(_with(t_f=2, t_comm=[0, 1, 0], memory_limit=4)).problem
    assert problem.t_f == (2.0,) * 4
    assert problem.t_comm == (0.0, 1.0, 0.0)
    assert problem.memory_limit == (4.0,) * 4


@pytest.mark.parametrize(("field", "value"), [
    ("t_f", True), ("m_b", False), ("memory_limit", True), ("num_ranks", True),
    ("t_w", [1.0, True, 1.0, 1.0]),
])
def test_boolean_is_refused(field: str, value: Any) -> None:
    # pydantic's lax mode would read JSON true as 1.0.
    error = _refused(_with(**{field: value}))
    assert error.field == field
    assert "True" in str(error) or "False" in str(error)


def test_t_comm_length_message_spells_boundary() -> None:
    assert "one per stage boundary (got 4)" in str(_refused(_with(t_comm=[0.1] * 4)))


# Good profiles.


def test_repo_has_profiles() -> None:
    assert len(PROFILE_FILES) >= 2


@pytest.mark.parametrize("path", PROFILE_FILES, ids=lambda p: p.stem)
def test_repo_profile_loads(path: Path) -> None:
    profile = load_profile(path)
    problem = profile.problem
    assert problem.num_stages == profile.num_ranks * profile.num_chunks
    assert problem.simple_lower_bound > 0


@pytest.mark.parametrize("path", PROFILE_FILES, ids=lambda p: p.stem)
def test_repo_profile_equals_shared_twin(path: Path) -> None:
    # ../shared/profiles beside the checkout holds the originals (tests/needs.py: a
    # missing folder fails under CI, skips elsewhere); every repo profile has its twin.
    twin = shared_path("profiles") / path.name
    assert twin.is_file(), f"{path.name} has no twin in {twin.parent}"
    assert path.read_bytes() == twin.read_bytes()
    assert json.loads(path.read_text()) == json.loads(twin.read_text())


def test_scalars_resolve_per_stage() -> None:
    problem = parse_profile(_with(t_comm=0.25, memory_limit=6.0)).problem
    assert problem.t_f == (1.0,) * 4
    assert problem.t_b == (2.0,) * 4
    assert problem.t_comm == (0.25,) * 3
    assert problem.m_w == (0.5,) * 4
    assert problem.memory_limit == (6.0,) * 4
    assert problem.placement == "loop"


def test_m_w_may_exceed_m_b() -> None:
    # DESIGN.md section 6.1: what B stashes for W may outweigh what F kept.
    problem = parse_profile(_with(m_w=[0.5, 0.5, 1.5, 0.5])).problem
    assert problem.m_w == (0.5, 0.5, 1.5, 0.5)
    assert parse_profile(_with(m_w=2.0)).problem.m_w == (2.0,) * 4


def test_lists_resolve_per_stage_and_rank() -> None:
    problem = parse_profile(_with(
        t_f=[1.0, 2.0, 3.0, 4.0], t_w=[0.5, 0.0, 1.5, 2.0], t_comm=[0.1, 0.2, 0.3],
        m_b=[1.0, 2.0, 3.0, 4.0], m_w=[0.0, 2.0, 1.0, 4.0],
        memory_limit=[1.0, 5.0, 3.0, 40.0])).problem
    assert problem.t_f == (1.0, 2.0, 3.0, 4.0)
    assert problem.t_w == (0.5, 0.0, 1.5, 2.0)
    assert problem.t_comm == (0.1, 0.2, 0.3)
    assert problem.m_w == (0.0, 2.0, 1.0, 4.0)
    assert problem.memory_limit == (1.0, 5.0, 3.0, 40.0)
    assert problem.min_memory_per_rank == (1.0, 2.0, 3.0, 4.0)
    # busy: m * (t_f + t_b + t_w) per rank's stage.
    assert problem.busy_per_rank == (28.0, 32.0, 52.0, 64.0)
    assert problem.simple_lower_bound == 64.0


def test_no_limit_is_infinite() -> None:
    assert parse_profile(BASE).problem.memory_limit == (math.inf,) * 4


@pytest.mark.parametrize(("placement", "stage_to_rank"), [
    ("loop", (0, 1, 2, 3, 0, 1, 2, 3)),
    ("v", (0, 1, 2, 3, 3, 2, 1, 0)),
])
def test_stage_to_rank_p4_v2(placement: str, stage_to_rank: tuple[int, ...]) -> None:
    problem = parse_profile(_with(num_chunks=2, placement=placement)).problem
    assert problem.num_stages == 8
    assert problem.stage_to_rank == stage_to_rank
    for r, stages in enumerate(problem.rank_to_stages):
        assert stages == tuple(s for s in range(8) if stage_to_rank[s] == r)


def test_v_placement_comm_only_across_ranks() -> None:
    problem = parse_profile(_with(num_chunks=2, placement="v",
                                  t_comm=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7])).problem
    assert problem.comm(3, 4) == 0.0  # stages 3 and 4 both run on rank 3
    assert problem.comm(2, 3) == problem.comm(3, 2) == 0.3
    assert problem.comm(4, 5) == 0.5


def test_two_chunk_resolution() -> None:
    m_b = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    loop = parse_profile(_with(num_chunks=2, placement="loop", m_b=m_b, m_w=0.5,
                               memory_limit=[6.0, 8.0, 10.0, 12.0])).problem
    assert loop.min_memory_per_rank == (6.0, 8.0, 10.0, 12.0)
    assert loop.memory_limit == (6.0, 8.0, 10.0, 12.0)
    v = parse_profile(_with(num_chunks=2, placement="v", m_b=m_b, m_w=0.5)).problem
    assert v.min_memory_per_rank == (9.0, 9.0, 9.0, 9.0)
    # Each rank runs two stages of 1 + 2 + 1 per microbatch.
    assert v.busy_per_rank == (64.0,) * 4


def test_limit_exactly_the_need_is_accepted() -> None:
    problem = parse_profile(_with(num_chunks=2, placement="v", memory_limit=2.0)).problem
    assert problem.memory_limit == (2.0,) * 4


@pytest.mark.parametrize("data", [
    BASE,
    _with(name="toy", description="a toy", t_comm=[0.1, 0.2, 0.3], memory_limit=[2, 3, 4, 5]),
    _with(num_chunks=2, placement="v", t_f=[1.0, 2.0] * 4, m_w=0.0, memory_limit=7.5),
    _with(num_chunks=3, placement="loop", t_comm=0.5),
], ids=["base", "lists", "v", "loop3"])
def test_json_round_trip(data: dict[str, Any]) -> None:
    profile = parse_profile(data)
    _ = profile.problem  # a cached property must not spoil equality
    again = parse_profile(json.loads(profile.model_dump_json()))
    assert again == profile
    assert again.problem == profile.problem


def test_repo_profile_round_trip() -> None:
    for path in PROFILE_FILES:
        profile = load_profile(path)
        assert Profile.model_validate_json(profile.model_dump_json()) == profile


def test_problem_is_from_profile() -> None:
    profile = parse_profile(BASE)
    assert profile.problem == Problem.from_profile(profile)
