"""Unequal microbatches (DESIGN.md 6.2): the profile's matrices and scales, the simulator
timing each microbatch with its own values, the order of entry, and the reduction to
today's figures when the microbatches are alike."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest
from ppsched.solver.generators import REGISTRY
from ppsched.solver.heuristic.entry_order import entry_orders, inverse, permuted
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.ops import Op
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.model.schedule import parse_schedule
from ppsched.solver.sim.emit import schedule_from_orders
from ppsched.solver.sim.simulator import simulate
from ppsched.solver.solving import ExactOptions, solve

from tests.solver.test_brute_force_wide import _optimum, _rank_orders

PROFILES = sorted((Path(__file__).resolve().parents[2] / "profiles").glob("*.json"))


def _data(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _as_matrices(data: dict[str, Any]) -> dict[str, Any]:
    """The same profile with every per-stage field written as a constant matrix."""
    p = data["num_ranks"] * data.get("num_chunks", 1)
    m = data["num_microbatches"]
    out = dict(data)
    for name, count in (("t_f", p), ("t_b", p), ("t_w", p), ("m_b", p), ("m_w", p),
                        ("t_comm", p - 1)):
        value = data.get(name, 0.0)
        rows = value if isinstance(value, list) else [value] * count
        out[name] = [[x] * m for x in rows]
    return out


def _timed(schedule: Any) -> tuple[Any, Any]:
    return ([[(o.kind, o.stage, o.microbatch, o.start, o.end) for o in ops]
             for ops in schedule.ranks], schedule.metrics.model_dump())


@pytest.mark.parametrize("path", PROFILES, ids=[p.stem for p in PROFILES])
def test_alike_microbatches_give_exactly_todays_figures(path: Path) -> None:
    """All-ones scales and constant matrices resolve to the same problem, and every
    registered schedule times exactly alike on it (the heuristic too, where quick)."""
    base = _data(path)
    a = parse_profile(base)
    ones = dict(base, microbatches=[{}] * base["num_microbatches"])
    for other in (ones, _as_matrices(base)):
        b = parse_profile(other)
        assert b.problem.uniform_microbatches
        assert b.problem == a.problem  # same per-stage values, same caches
        for name, generator in REGISTRY.items():
            if not generator.supports(a.problem):
                continue
            orders = generator(a.problem)
            one, two = simulate(a.problem, orders), simulate(b.problem, orders)
            assert (two.start, two.end, two.memory_peak, two.metrics) == \
                (one.start, one.end, one.memory_peak, one.metrics), name
        if a.num_ranks * a.num_microbatches <= 8 * 32:
            assert _timed(solve(b)) == _timed(solve(a))
    # Without the new fields nothing new appears in the JSON.
    text = solve(a, "1f1b").model_dump_json()
    assert '"microbatch_order"' not in text and '"microbatches"' not in text


def test_a_scaled_microbatch_takes_its_own_times_memory_and_latency() -> None:
    # p = 2, m = 2, GPipe-like order by hand; microbatch 1 twice as long, 3x the memory.
    profile = parse_profile({
        "num_ranks": 2, "num_microbatches": 2, "t_f": 1, "t_b": 1, "t_w": 1, "t_comm": 0.5,
        "m_b": 1, "m_w": 0.5,
        "microbatches": [{}, {"scale": 2, "memory_scale": 3}]})
    orders = [[Op("F", 0, 0), Op("F", 0, 1), Op("BW", 0, 0), Op("BW", 0, 1)],
              [Op("F", 1, 0), Op("F", 1, 1), Op("BW", 1, 0), Op("BW", 1, 1)]]
    sim = simulate(profile.problem, orders)
    assert sim.ok, sim.violations
    # Rank 0: F0 [0,1], F1 [1,3]. Rank 1: F0 [1.5,2.5], F1 [4.5,6.5] (latency 0.5*3),
    # BW0 [6.5,8.5], BW1 [8.5,12.5]. Rank 0: BW0 at 8.5+0.5 = 9, ends 11; BW1 at
    # 12.5+1.5 = 14, ends 18.
    assert sim.start == [[0, 1, 9, 14], [1.5, 4.5, 6.5, 8.5]]
    assert sim.end == [[1, 3, 11, 18], [2.5, 6.5, 8.5, 12.5]]
    assert sim.memory_peak == (4.0, 4.0)
    assert sim.metrics is not None
    assert sim.metrics.cost == 18.0
    assert sim.metrics.busy == (1 + 2 + 2 + 4,) * 2


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"t_f": [[1, 2], [1]]}, "t_f[1]", "num_microbatches = 2"),
    ({"t_f": [[1, 2]]}, "t_f", "a matrix of 2 rows"),
    ({"t_b": [[1, -2], [1, 1]]}, "t_b[0][1]", "a finite number >= 0"),
    ({"microbatches": [{}]}, "microbatches", "num_microbatches = 2"),
    ({"microbatches": [{}, {"scale": 0}]}, "microbatches[1].scale", "> 0"),
    ({"microbatches": [{}, {"memory_scale": -1}]}, "microbatches[1].memory_scale", "> 0"),
    ({"microbatches": [{}, {}], "t_w": [[1, 1], [1, 1]]}, "microbatches", "a matrix"),
    ({"microbatches": [{}, {"size": 2}]}, "microbatches", "no such field"),
])
def test_bad_per_microbatch_values_are_named(change: dict[str, Any], field: str,
                                             words: str) -> None:
    data = {"num_ranks": 2, "num_microbatches": 2, "t_f": 1, "t_b": 1, "t_w": 1, "m_b": 1,
            "m_w": 0.5, **change}
    with pytest.raises(ProfileError) as info:
        parse_profile(data)
    assert info.value.field.startswith(field)
    assert words in str(info.value)


def test_the_memory_floor_is_the_largest_microbatch() -> None:
    data = {"num_ranks": 2, "num_microbatches": 3, "t_f": 1, "t_b": 1, "t_w": 1, "m_b": 1,
            "m_w": 0.5, "microbatches": [{}, {"memory_scale": 2.5}, {}],
            "memory_limit": 2}
    with pytest.raises(ProfileError, match="largest microbatch"):
        parse_profile(data)
    assert parse_profile({**data, "memory_limit": 2.5}).problem.min_memory_per_rank == \
        (2.5, 2.5)


def _unequal(p: int, m: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    return {"num_ranks": p, "num_microbatches": m,
            "t_f": [rng.choice([0.5, 1.0, 1.5]) for _ in range(p)],
            "t_b": [rng.choice([0.5, 1.0, 2.0]) for _ in range(p)],
            "t_w": [rng.choice([0.0, 0.5, 1.0]) for _ in range(p)],
            "t_comm": [rng.choice([0.0, 0.5, 2.0]) for _ in range(p - 1)],
            "m_b": 1, "m_w": 0.5,
            "microbatches": [{"scale": rng.choice([0.5, 1, 2, 3]),
                              "memory_scale": rng.choice([1, 1.5])} for _ in range(m)]}


@pytest.mark.parametrize("seed", range(6))
def test_bound_holds_and_heuristic_is_valid_on_tiny_unequal_cases(seed: int) -> None:
    """Against the optimum of every order of each candidate numbering (exhaustive)."""
    profile = parse_profile(_unequal(2 if seed < 4 else 3, 2, seed))
    schedule = solve(profile, layouts=((1, None),))  # the exhaustive search's layout
    assert schedule.metrics is not None
    order = tuple(schedule.microbatch_order or range(2))
    optima = {o: _optimum(profile.problem.reordered(o)) for o in entry_orders(profile.problem)}
    assert order in optima
    assert simulate(profile.problem.reordered(order), schedule.orders()).ok
    # The bound holds in every numbering (it does not depend on it) ...
    assert schedule.metrics.lower_bound <= min(optima.values()) + 1e-9
    # ... and no schedule beats the optimum of its own numbering.
    assert schedule.metrics.cost >= optima[order] - 1e-9


@pytest.mark.parametrize("method", ["1f1b", "gpipe", "zb-h1", "zb-h2", "heuristic"])
def test_every_method_gives_a_valid_schedule_on_unequal_microbatches(method: str) -> None:
    rng = random.Random(5)
    base = _data(PROFILES[0])
    scales = [{"scale": round(rng.lognormvariate(0, 0.6), 3),
               "memory_scale": round(rng.lognormvariate(0, 0.2), 3)}
              for _ in range(base["num_microbatches"])]
    profile = parse_profile(dict(base, microbatches=scales, memory_limit=None))
    schedule = solve(profile, method)
    back = parse_schedule(json.loads(schedule.model_dump_json()))
    sim = simulate(back.problem(), back.orders())
    assert sim.ok and sim.metrics is not None
    assert sim.metrics.cost == pytest.approx(schedule.metrics.cost)  # type: ignore[union-attr]
    assert back.profile.microbatches == profile.microbatches  # echoed as given


def test_the_heuristic_chooses_the_order_of_entry_and_reports_it() -> None:
    rng = random.Random(3)
    base = _data(PROFILES[0])
    scales = [{"scale": round(rng.lognormvariate(0, 0.6), 3)}
              for _ in range(base["num_microbatches"])]
    profile = parse_profile(dict(base, microbatches=scales))
    chosen = solve(profile)
    in_input_order = solve(profile, "heuristic") if chosen.microbatch_order is None else \
        None
    order = chosen.microbatch_order or list(range(profile.num_microbatches))
    assert sorted(order) == list(range(profile.num_microbatches))
    # Every candidate order alone is no better than the chosen one.
    for candidate in entry_orders(profile.problem):
        alone = solve(permuted(profile, candidate), "heuristic")
        assert alone.metrics is not None and chosen.metrics is not None
        # The permuted profile solves alike orders of its own: compare costs only.
        assert chosen.metrics.cost <= alone.metrics.cost + 1e-9
    assert in_input_order is None or in_input_order.metrics == chosen.metrics
    assert inverse(inverse(order)) == order


def test_a_schedule_is_timed_with_its_microbatch_order() -> None:
    profile = parse_profile({"num_ranks": 2, "num_microbatches": 2, "t_f": 1, "t_b": 1,
                             "t_w": 1, "m_b": 1, "m_w": 0.5,
                             "microbatches": [{"scale": 3}, {}]})
    orders = [[Op("F", 0, 0), Op("F", 0, 1), Op("BW", 0, 0), Op("BW", 0, 1)],
              [Op("F", 1, 0), Op("F", 1, 1), Op("BW", 1, 0), Op("BW", 1, 1)]]
    plain = schedule_from_orders(profile, orders, "custom")
    swapped = schedule_from_orders(profile, orders, "custom", microbatch_order=[1, 0])
    assert swapped.microbatch_order == [1, 0]
    assert plain.metrics is not None and swapped.metrics is not None
    # Op microbatch 0 is input microbatch 1 (scale 1) in the swapped schedule.
    assert (plain.ranks[0][0].end, swapped.ranks[0][0].end) == (3.0, 1.0)
    assert swapped.metrics.span != plain.metrics.span
    with pytest.raises(ProfileError, match="microbatch_order"):
        parse_schedule({**json.loads(swapped.model_dump_json()), "microbatch_order": [0, 0]})


@pytest.mark.parametrize("backend", ["cpsat", "milp"])
@pytest.mark.parametrize("seed", range(4))
def test_exact_models_on_unequal_microbatches_against_the_fifo_optimum(
        seed: int, backend: str) -> None:
    """CP-SAT and the MILP, with each microbatch's own times, latencies and memory, find
    the optimum over FIFO orders of the chosen order of entry (exhaustive on tiny cases),
    and their bound never passes it."""
    data = _unequal(2, 3, seed + 100)
    data["memory_limit"] = 3.5 if seed % 2 else None
    profile = parse_profile(data)
    # CP-SAT under a work limit (the optimum on any load); CBC has only wall time.
    budget = {"work_limit": 20} if backend == "cpsat" else {"time_limit_s": 20}
    schedule = solve(profile, "ilp", exact=ExactOptions(workers=1, seed=0, backend=backend,
                                                        **budget), layouts=((1, None),))
    assert schedule.solver is not None and schedule.metrics is not None
    order = tuple(schedule.microbatch_order or range(3))
    problem = profile.problem.reordered(order)
    assert simulate(problem, schedule.orders()).ok
    fifo_best = _fifo_optimum(problem)
    assert schedule.metrics.cost == pytest.approx(fifo_best, abs=1e-9)
    assert schedule.solver.bound <= fifo_best + 1e-9
    # Proven: exactly, or within the stated tolerance of scaling a zero-time op to a tick.
    assert schedule.solver.bound >= fifo_best * (1 - 1e-4)
    heuristic = solve(profile, layouts=((1, None),))
    assert heuristic.metrics is not None
    assert schedule.metrics.cost <= heuristic.metrics.cost + 1e-9


def _fifo_optimum(problem: Any) -> float:
    """The least cost over orders keeping each kind in microbatch order per stage."""
    return min((cost for cost, _ in valid_fifo_schedules(problem)), default=float("inf"))


def valid_fifo_schedules(problem: Any) -> list[tuple[float, list[list[Any]]]]:
    """Every valid schedule keeping each kind in microbatch order per stage, with its
    cost (exhaustive: tiny cases only)."""
    per_rank = []
    for r in range(problem.num_ranks):
        orders = []
        for order in _rank_orders(problem, r):
            seen = {k: [op.microbatch for op in order if op.kind == k] for k in "FBW"}
            if all(v == sorted(v) for v in seen.values()) and \
                    not any(op.kind == "BW" for op in order):
                orders.append(list(order))
        per_rank.append(orders)
    valid = []
    for combo in itertools.product(*per_rank):
        sim = simulate(problem, list(combo))
        if sim.ok and sim.metrics is not None:
            valid.append((sim.metrics.cost, list(combo)))
    return valid


@pytest.mark.parametrize("layouts", ["1", "1,v"])
def test_the_heuristic_fits_a_limit_that_binds_on_unequal_memory(layouts: str) -> None:
    # Found by benchmarks/varmb_exact.py: deciding on the mean m_b, the heuristic broke
    # the limit (8.322 > 8); it now decides on each stage's largest m_b.
    from ppsched.solver.solving.layouts import parse_layouts

    rng = random.Random(0)
    sizes = [round(rng.lognormvariate(0.0, 0.5), 3) for _ in range(16)]
    base = _data(PROFILES[0])
    profile = parse_profile({**base, "num_microbatches": 16, "memory_limit": 8.0,
                             "microbatches": [{"scale": c, "memory_scale": c}
                                              for c in sizes]})
    schedule = solve(profile, layouts=parse_layouts(layouts))
    assert schedule.metrics is not None
    assert max(schedule.metrics.peak_memory) <= 8.0 + 1e-9
    assert simulate(schedule.problem(), schedule.orders()).ok


def test_activation_policies_with_unequal_microbatches_are_refused_by_name() -> None:
    with pytest.raises(ProfileError, match="t_offload"):
        parse_profile({"num_ranks": 2, "num_microbatches": 2, "t_f": 1, "t_b": 1, "t_w": 1,
                       "m_b": 1, "m_w": 0.5, "t_offload": 0.5,
                       "microbatches": [{"scale": 2}, {}]})


def test_lower_memory_quantiles_feed_the_pipeline_where_memory_binds() -> None:
    """Deciding with each stage's largest memory starves the pipeline below 1F1B's
    memory; a lower quantile's order, kept only when it fits every microbatch's own
    memory, is much shorter on this lognormal case (benchmarks.varmb_exact's case 0)."""
    from ppsched.solver.heuristic.decisions import decision_problems
    from ppsched.solver.heuristic.search import zb_heuristic

    from benchmarks.varmb_exact import case

    profile = parse_profile(case(0, "1p"))
    problem = profile.problem
    quantiles = [q for q, _ in decision_problems(problem)]
    assert quantiles[0] == 1.0 and len(quantiles) > 1
    largest = next(decide for _, decide in decision_problems(problem))
    cautious = simulate(problem, zb_heuristic(largest).orders)
    assert cautious.ok and cautious.metrics is not None
    schedule = solve(profile, layouts=((1, None),), keep_order=True)
    assert schedule.metrics is not None
    assert schedule.metrics.cost < 0.8 * cautious.metrics.cost
    assert simulate(problem, schedule.orders()).ok
    # Alike microbatches, or no limit: one decision problem, the problem itself.
    alike = parse_profile({**case(0, "1p"), "microbatches": None})
    assert [q for q, _ in decision_problems(alike.problem)] == [1.0]
    unlimited = parse_profile(case(0, "none"))
    assert [q for q, _ in decision_problems(unlimited.problem)] == [1.0]
