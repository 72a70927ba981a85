"""Partitioning (DESIGN.md 6.7): per-layer profiles, their cut, the search against an
exhaustive one over every cut, its bound, and the baselines' rules."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from ppsched.solver.model import (
    ProfileError,
    cut_profile,
    load_layers,
    parse_layers,
    parse_profile,
    parse_schedule,
    with_chunks,
)
from ppsched.solver.partition import (
    CutCosts,
    all_cuts,
    best_by_exhaustion,
    even_cut,
    judge,
    megatron_cuts,
    partition,
    torchtitan_cut,
)

ROOT = Path(__file__).resolve().parents[2]


def _layer(name: str, t: float, m: float = 1.0) -> dict[str, Any]:
    return {"name": name, "t_f": t, "t_b": t, "t_w": t / 2, "m_b": m, "m_w": m / 2}


def _model(blocks: int, p: int, m: int = 8, head: float = 3.0, **extra: Any) -> dict[str, Any]:
    layers = [_layer("tok_embeddings", 0.1, 0.01)]
    layers += [_layer(f"layers.{i}", 1.0) for i in range(blocks)]
    layers += [_layer("norm", 0.05, 0.1), _layer("lm_head", head, 2.0)]
    return {"num_ranks": p, "num_microbatches": m, "layers": layers, **extra}


# --- parsing -----------------------------------------------------------------------------

@pytest.mark.parametrize(("change", "field", "value"), [
    (lambda d: d["layers"][1].pop("t_b"), "layers[1].t_b", "missing"),
    (lambda d: d["layers"][2].update(t_f=-1.0), "layers[2].t_f", "-1.0"),
    (lambda d: d["layers"][2].update(m_b="big"), "layers[2].m_b", "'big'"),
    (lambda d: d["layers"][0].update(flops=3), "layers[0].flops", "3"),
    (lambda d: d.update(num_rank=4), "num_rank", "4"),
    (lambda d: d.update(t_comm=[0.1, 0.2]), "t_comm", "[0.1, 0.2]"),
    (lambda d: d.update(memory_limit=0), "memory_limit", "0"),
    (lambda d: d["layers"][3].update(name="layers.0"), "layers[3].name", "'layers.0'"),
    (lambda d: d.update(layers=d["layers"][:3]), "layers", "3 layers"),
])
def test_bad_input_names_the_field_and_value(change: Any, field: str, value: str) -> None:
    data = _model(4, 4)
    change(data)
    with pytest.raises(ProfileError) as caught:
        parse_layers(data)
    message = str(caught.value)
    assert caught.value.field == field, message
    assert value in message and "expected" in message


def test_the_cut_is_an_ordinary_profile_with_its_cut() -> None:
    layers = parse_layers(_model(4, 2, t_comm=[0.3], memory_limit=10.0))
    profile = cut_profile(layers, (3, 4))
    assert profile.t_f == [2.1, 2 + 0.05 + 3.0]
    assert profile.m_b == [2.01, 2 + 0.1 + 2.0]
    assert profile.layers_per_stage == [3, 4]
    assert profile.stage_layers == [["tok_embeddings", "layers.0", "layers.1"],
                                    ["layers.2", "layers.3", "norm", "lm_head"]]
    # It echoes through a schedule and reads back; re-cut into chunks, the cut is dropped.
    schedule = judge(layers, (3, 4)).schedule
    assert schedule is not None
    again = parse_schedule(json.loads(schedule.model_dump_json()))
    assert again.profile.layers_per_stage == [3, 4]
    assert with_chunks(profile, 2, "v").layers_per_stage is None
    with pytest.raises(ProfileError, match="layers_per_stage"):
        cut_profile(layers, (2, 2, 3))
    with pytest.raises(ProfileError, match="memory_limit"):
        cut_profile(parse_layers(_model(4, 2, memory_limit=3.0)), (1, 6))


def test_a_profile_refuses_a_cut_of_the_wrong_shape() -> None:
    data = json.loads((ROOT / "profiles" / "uniform-p4-m8.json").read_text())
    with pytest.raises(ProfileError, match="layers_per_stage"):
        parse_profile({**data, "layers_per_stage": [1, 2, 3]})
    with pytest.raises(ProfileError, match="stage_layers"):
        parse_profile({**data, "layers_per_stage": [1, 1, 1, 1],
                       "stage_layers": [["a"], ["b"], ["c"], ["d", "e"]]})


# --- the search against an exhaustive one ------------------------------------------------

def _random_case(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    p = rng.randint(2, 4)
    n = rng.randint(p, 12)
    layers = [{"name": f"l{i}", "t_f": rng.uniform(0.1, 3), "t_b": rng.uniform(0.1, 3),
               "t_w": rng.uniform(0, 2), "m_b": rng.uniform(0.1, 2),
               "m_w": rng.uniform(0, 1)} for i in range(n)]
    data: dict[str, Any] = {"num_ranks": p, "num_microbatches": rng.randint(1, 3 * p),
                            "layers": layers, "t_comm": rng.choice([0.0, 0.2])}
    if rng.random() < 0.6:  # tight limits: between the largest layer and a bit more
        data["memory_limit"] = round(sum(x["m_b"] for x in layers) / p
                                     * rng.uniform(1.0, 2.5), 3)
    return data


@pytest.mark.parametrize("seed", range(24))
def test_equals_the_exhaustive_search_over_every_cut(seed: int) -> None:
    layers = parse_layers(_random_case(seed))
    costs = CutCosts.of(layers)
    judged = {cut: judge(layers, cut) for cut in all_cuts(len(layers.layers),
                                                          layers.num_ranks)}
    best = min(j.step_time for j in judged.values())
    if math.isinf(best):  # no cut fits: the search says so with the limit
        with pytest.raises(ProfileError, match="memory_limit"):
            partition(layers)
        return
    found = partition(layers)
    assert found.best.step_time == pytest.approx(best, rel=1e-12)
    assert found.proven  # at most 165 cuts: all fit under the default budget
    assert best_by_exhaustion(layers) == pytest.approx(best, rel=1e-12)
    # The bound holds over every cut and every schedule: below each judged step time,
    # and each cut's own bound below its step time.
    for cut, verdict in judged.items():
        assert found.lower_bound <= verdict.step_time + 1e-9
        assert costs.bound(cut) <= verdict.step_time + 1e-9
        if verdict.schedule is not None:  # and below the solver's own bound of the cut
            assert costs.bound(cut) <= verdict.schedule.metrics.makespan + 1e-9


def test_a_small_budget_is_still_never_worse_than_the_rules() -> None:
    layers = load_layers(ROOT / "profiles" / "layers" / "llama3-8b-p4-m16.json")
    found = partition(layers, budget=1)
    assert {c.label for c in found.compared} == {"ppsched", "even split", "torchtitan",
                                                 "Megatron first/last"}
    assert all(found.best.step_time <= c.judged.step_time
               for c in found.compared if c.judged is not None)


# --- the rules users have ----------------------------------------------------------------

def test_torchtitan_rule_is_its_split_with_the_ends_joined() -> None:
    # `ppsched torchtitan --layers 22` on p = 8: 2 3 3 3 3 3 3 2 transformer layers.
    layers = parse_layers(_model(22, 8))
    assert torchtitan_cut(layers) == (3, 3, 3, 3, 3, 3, 3, 4)
    assert even_cut(layers) == (4, 3, 3, 3, 3, 3, 2, 4)


def test_megatron_tries_fewer_blocks_on_the_end_stages() -> None:
    layers = parse_layers(_model(8, 4))
    tried = {(a, b): cut for a, b, cut in megatron_cuts(layers)}
    # k = 2 per middle stage: 4 left for the ends, at most 2 each; k = 3: 2 left; k = 4:
    # none (the end stages keep only the embedding and the head).
    assert set(tried) == {(2, 2), (0, 2), (1, 1), (2, 0), (0, 0)}
    assert tried[(1, 1)] == (2, 3, 3, 3)


def test_one_and_two_ranks_and_unnamed_layers() -> None:
    layers = [{"name": n, "t_f": t, "t_b": t, "t_w": t / 2, "m_b": 1.0, "m_w": 0.5}
              for n, t in (("a", 1.0), ("b", 2.0), ("c", 3.0), ("d", 1.0))]
    for p in (1, 2, 4):
        data = {"num_ranks": p, "num_microbatches": 4, "layers": layers,
                "memory_limit": [4.0] * p, "t_comm": [0.1] * (p - 1)}
        found = partition(parse_layers(data))
        assert found.proven
        assert found.best.step_time == pytest.approx(best_by_exhaustion(parse_layers(data)))
    one = parse_layers({"num_ranks": 1, "num_microbatches": 4, "layers": layers})
    assert list(megatron_cuts(one)) == [(2, 2, (4,))]  # blocks: every layer but the ends



@pytest.mark.parametrize("seed", range(8))
def test_the_cut_dp_and_the_threshold_count_agree_with_listing_every_cut(seed: int) -> None:
    layers = parse_layers(_random_case(100 + seed))
    costs = CutCosts.of(layers)
    bounds = {cut: costs.bound(cut) for cut in all_cuts(len(layers.layers),
                                                        layers.num_ranks)}
    least, cut = costs.least()
    assert least == min(bounds.values())
    if cut is None:
        return
    assert bounds[cut] == least
    for budget in (1, 5, 40):
        threshold, above = costs.threshold_for(budget, least)
        listed = set(costs.under(threshold, budget))
        under = {c for c, b in bounds.items() if b <= threshold}
        assert costs.count_under(threshold) == len(under)
        assert listed <= under and len(listed) == min(budget, len(under))
        # Every cut not under the threshold has a bound >= `above` (what `proven` uses).
        assert all(b >= above for c, b in bounds.items() if c not in under)
        if len(under) > budget:  # more ties at the least bound than the budget lists
            assert threshold == least
