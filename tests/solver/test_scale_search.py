"""The size-aware search (`solver.heuristic.scale`): whole up to FULL_SEARCH_OPS ops,
a fixed few candidates above, decided by counts only."""

from __future__ import annotations

import json

import pytest
from ppsched.solver.heuristic import greedy, scale, search
from ppsched.solver.heuristic.lookahead import LARGE_CANDIDATES
from ppsched.solver.model import load_profile
from ppsched.solver.sim import simulate
from ppsched.solver.solving import solve

from tests.api.test_cli import PROFILES, ROOT


def test_every_public_profile_is_searched_whole_in_every_layout() -> None:
    # The answers of the public profiles (and the answer dump's) are the full search's.
    for path in PROFILES:
        data = json.loads(path.read_text())
        for chunks in (1, 2):
            ops = 3 * data["num_ranks"] * chunks * data["num_microbatches"]
            assert ops <= scale.FULL_SEARCH_OPS, path.name


@pytest.fixture
def everything_large(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """FULL_SEARCH_OPS at 0, and the candidates the searches build, recorded."""
    monkeypatch.setattr(scale, "FULL_SEARCH_OPS", 0)
    built: dict[str, list] = {"greedy": [], "lookahead": [], "warmup": []}
    for module, name, key in ((greedy, "_greedy", "greedy"),
                              (greedy, "_lookahead", "lookahead")):
        original = getattr(module, name)

        def record(problem, knobs, *args, _original=original, _key=key, **kwargs):
            built[_key].append(knobs)
            return _original(problem, knobs, *args, **kwargs)

        monkeypatch.setattr(module, name, record)
    original_families = search._Search.warmup_families

    def record_families(self):  # the warm-ups the first phase builds
        original_try = self.try_knobs

        def record_try(knobs):
            built["warmup"].append(knobs.warmup)
            return original_try(knobs)

        self.try_knobs = record_try
        try:
            original_families(self)
        finally:
            del self.try_knobs

    monkeypatch.setattr(search._Search, "warmup_families", record_families)
    return built


# Each layout alone: together, the single-chunk search is not run at this limit (its
# bound is above V's cost, `solving.first_best`).
@pytest.mark.parametrize("layout", [(1, None), (2, "v")], ids=["one-chunk", "v"])
def test_a_large_order_builds_a_fixed_few_candidates(everything_large: dict,
                                                     layout: tuple) -> None:
    profile = load_profile(ROOT / "profiles" / "gpt1.5b-p8-m24.json")
    limited = profile.model_copy(update={"memory_limit": 4.0})
    schedule = solve(type(profile).model_validate(limited.model_dump()), layouts=(layout,))
    if layout[0] == 1:
        assert 0 < len(set(everything_large["warmup"])) <= scale.LARGE_WARMUP_FAMILIES
        assert not everything_large["greedy"]
    else:
        assert len(everything_large["greedy"]) == 1  # the first raced build, no caps
        assert set(everything_large["lookahead"]) <= set(LARGE_CANDIDATES)
        assert not everything_large["warmup"]
    # Still a valid schedule within the limit, re-timed as the simulator times it.
    sim = simulate(schedule.problem(), schedule.orders())
    assert sim.ok and sim.metrics is not None and schedule.metrics is not None
    assert sim.metrics.cost == pytest.approx(schedule.metrics.cost, abs=1e-9)
