"""torch's schedule names resolve to ours, in one function that every front end calls."""

from __future__ import annotations

from pathlib import Path

import pytest
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.profile import load_profile, parse_profile
from ppsched.solver.sim.simulator import simulate
from ppsched.solver.solving.entry import solve
from ppsched.solver.solving.method_names import TORCH_ALIASES, aliases, methods, resolve_method

ROOT = Path(__file__).resolve().parents[2]
UNIFORM = load_profile(ROOT / "profiles" / "uniform-p4-m8.json")


@pytest.mark.parametrize(("name", "ours"), [
    ("GPipe", "gpipe"), ("gpipe", "gpipe"), ("1F1B", "1f1b"), ("1f1b", "1f1b"),
    ("Interleaved1F1B", "1f1b-interleaved"), ("interleaved1f1b", "1f1b-interleaved"),
    ("ZBVZeroBubble", "zb-v"), ("zbvzerobubble", "zb-v"), ("ZB-V", "zb-v"),
    ("InterleavedZeroBubble", "zb-loop"), ("interleavedzerobubble", "zb-loop"),
    ("heuristic", "heuristic"), ("ilp", "ilp"),
])
def test_torch_names_and_ours_resolve(name: str, ours: str) -> None:
    assert resolve_method(name) == ours


def test_every_alias_that_resolves_names_a_method_we_have() -> None:
    assert set(aliases().values()) <= set(methods())
    # The ones torch and we both build; DualPipeV joins when its generator is registered.
    assert {"GPipe", "1F1B", "Interleaved1F1B", "ZBVZeroBubble",
            "InterleavedZeroBubble"} <= set(aliases())
    assert set(aliases()) <= set(TORCH_ALIASES)


@pytest.mark.parametrize("name", ["1F1B", "GPipe"])
def test_solve_by_torch_name_gives_our_schedule(name: str) -> None:
    ours = resolve_method(name)
    by_alias, by_name = solve(UNIFORM, name), solve(UNIFORM, ours)
    assert by_alias.method == ours
    assert by_alias.orders() == by_name.orders()


def test_interleaved_zero_bubble_is_the_heuristic_on_two_looped_chunks() -> None:
    """torch's InterleavedZeroBubble: loop placement, v = 2 for a one-chunk profile, split
    backward (F, B, W per chunk); a valid order, not torch's own."""
    schedule = solve(UNIFORM, "InterleavedZeroBubble")
    assert (schedule.profile.num_chunks, schedule.profile.placement) == (2, "loop")
    kinds = {str(op.kind) for ops in schedule.orders() for op in ops}
    assert kinds == {"F", "B", "W"}
    assert simulate(schedule.problem(), schedule.orders()).ok


def test_interleaved_zero_bubble_refuses_a_v_profile() -> None:
    data = {**UNIFORM.model_dump(mode="json"), "num_ranks": 2, "num_chunks": 2,
            "placement": "v", "t_f": [1.0] * 4, "t_b": [1.0] * 4, "t_w": [1.0] * 4,
            "m_b": [1.0] * 4, "m_w": [1.0] * 4}
    with pytest.raises(ProfileError, match=r"invalid 'method': got 'zb-loop'.*V placement"):
        solve(parse_profile(data), "InterleavedZeroBubble")


@pytest.mark.parametrize("name", ["LoopedBFS"])
def test_torch_schedules_we_do_not_build_point_to_the_csv_route(name: str) -> None:
    with pytest.raises(ProfileError) as caught:
        resolve_method(name)
    assert caught.value.field == "method"
    assert "ppsched simulate FILE.csv" in str(caught.value)
    assert "ZBVZeroBubble" in str(caught.value)


def test_an_unknown_name_lists_ours_and_torchs() -> None:
    with pytest.raises(ProfileError, match=r"got 'zb-h3'.*zb-h2.*ZBVZeroBubble"):
        resolve_method("zb-h3")


def test_the_method_table_holds_both_registries() -> None:
    """The generators register themselves and the PipeOffload schedules (in `policies`,
    above the generators) are registered by the method table: both are listed."""
    from ppsched.solver.generators import REGISTRY
    from ppsched.solver.solving import methods

    assert {"pipeoffload-full", "pipeoffload-selective", "zb-h1", "zb-v"} <= set(REGISTRY)
    assert set(REGISTRY) <= set(methods())
