"""The heuristic on profiles far from the paper's: m_w > m_b, tight and per-rank limits,
and the regression cases issue 11 measured."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest
from ppsched.solver.generators.classic import one_f_one_b_capped
from ppsched.solver.generators.zero_bubble import zb_h1, zb_h2
from ppsched.solver.heuristic.build import build
from ppsched.solver.heuristic.early_stop import MARGIN
from ppsched.solver.heuristic.improve import improve
from ppsched.solver.heuristic.knobs import FILL_CHOICES, Knobs
from ppsched.solver.heuristic.order_timing import time_order
from ppsched.solver.heuristic.paper import FLAGS, paper_build, paper_candidates, paper_zb
from ppsched.solver.heuristic.search import max_in_flight, warmup_candidates, zb_heuristic
from ppsched.solver.model.ops import Op
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.emit import schedule_from_orders
from ppsched.solver.sim.simulator import peak_memory, simulate
from ppsched.solver.solving.entry import solve
from ppsched.solver.solving.pipeline import heuristic_orders

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("p", "m", "limit", "m_w"), list(itertools.product(
    (2, 4), (3, 8), (None, 2.0, 3.5, 6.0, [6.0, 2.0, 5.0, 2.5]), (1.5, 3.0))))
def test_m_w_above_m_b_fits_the_limit(p: int, m: int, limit: object, m_w: float) -> None:
    # DESIGN.md 6.1: a B adds m_w - m_b > 0, so Ws must also make room for Bs.
    if isinstance(limit, list):
        limit = limit[:p]
    profile = parse_profile({"num_ranks": p, "num_microbatches": m, "t_f": 1.0, "t_b": 1.2,
                             "t_w": 0.8, "t_comm": 0.1, "m_b": 1.0, "m_w": m_w,
                             "memory_limit": limit})
    schedule = solve(profile)  # validated by the simulator, or it raises
    assert schedule.metrics is not None
    limits = profile.problem.memory_limit
    assert all(x <= cap + 1e-9 for x, cap in zip(schedule.metrics.peak_memory, limits,
                                                  strict=True))
    # The order uses split backwards wherever the limit leaves room for a B's m_w.
    if limit is None:
        assert any(op.kind == "W" for op in schedule.orders()[0])


def test_v_layout_with_m_w_above_m_b() -> None:
    profile = parse_profile({"num_ranks": 4, "num_microbatches": 8, "num_chunks": 2,
                             "placement": "v", "t_f": 0.5, "t_b": 0.6, "t_w": 0.4,
                             "t_comm": 0.05, "m_b": 0.5, "m_w": 1.0, "memory_limit": 4.0})
    orders, _, value = heuristic_orders(profile.problem)
    sim = simulate(profile.problem, orders)
    assert sim.ok and sim.metrics is not None
    assert sim.metrics.cost == pytest.approx(value)
    schedule_from_orders(profile, orders, "check")


REGRESSION = {"num_ranks": 2, "num_microbatches": 3, "t_f": [1, 0.25], "t_b": [1, 0.5],
              "t_w": [2, 0.25], "t_comm": [6], "m_b": [1, 0.5], "m_w": [0.3333, 0],
              "memory_limit": [2, 1.5]}


def test_exhaustive_search_miss_is_fixed() -> None:
    # Issue 11: the heuristic gave 33.5; the optimum (and the bound) is 32.5, with rank 0
    # running F0 F1 B0 B1 F2 W0 W1 B2 W2. The local search finds it.
    schedule = solve(parse_profile(REGRESSION))
    assert schedule.metrics is not None
    assert schedule.metrics.cost == pytest.approx(32.5)
    rank0 = " ".join(f"{op.kind}{op.microbatch}" for op in schedule.orders()[0])
    assert rank0 == "F0 F1 B0 B1 F2 W0 W1 B2 W2"


def random_profile(rng: random.Random) -> dict[str, object]:
    """A profile far from the paper's: per-stage noise, W-heavy or t_w = 0, latency up
    to 6x the op times, m_w around m_b, scalar, per-rank or no limits."""
    p, m = rng.randint(2, 5), rng.randint(1, 10)
    limit: object = rng.choice([None, round(rng.uniform(0.5, 2.0) * p, 2),
                                [round(rng.uniform(1.0, 2.0 * p), 2) for _ in range(p)]])
    return {"num_ranks": p, "num_microbatches": m,
            "t_f": [round(rng.uniform(0.25, 1.5), 2) for _ in range(p)],
            "t_b": [round(rng.uniform(0.25, 2.5), 2) for _ in range(p)],
            "t_w": [rng.choice([0.0, round(rng.uniform(0.1, 3.0), 2)]) for _ in range(p)],
            "t_comm": [rng.choice([0.0, round(rng.uniform(0.0, 6.0), 2)])
                       for _ in range(p - 1)],
            "m_b": 1.0, "m_w": rng.choice([0.0, 0.5, 1.0, 1.5]), "memory_limit": limit}


@pytest.mark.parametrize("seed", range(80))
def test_heuristic_never_worse_than_the_paper(seed: int) -> None:
    profile = parse_profile(random_profile(random.Random(seed)))
    problem = profile.problem
    best = paper_zb(problem)
    _, _, value = heuristic_orders(problem)
    for built in paper_candidates(problem):
        # A paper build times itself exactly as the simulator does.
        sim = simulate(problem, built.orders)
        assert sim.ok and sim.metrics is not None
        assert sim.metrics.cost == pytest.approx(built.cost)
        assert sim.metrics.makespan == pytest.approx(built.makespan)
    if best is not None:
        assert value <= best.cost + 1e-9
    # Skipping the flag combinations a run never read loses nothing.
    every = [b.cost for b in (paper_build(problem, f) for f in FLAGS) if b is not None]
    assert (best is None) == (not every)
    if best is not None:
        assert best.cost == pytest.approx(min(every))


def test_the_paper_builds_on_most_seeds() -> None:
    # The comparison above runs only where the paper's algorithm builds under the limit;
    # on this fixed seed table it builds on 71 of 80 (measured), so it cannot go vacuous.
    built = sum(paper_zb(parse_profile(random_profile(random.Random(seed))).problem)
                is not None for seed in range(80))
    assert built >= 60, f"the paper's algorithm builds on {built} of 80 seeds only"


def test_gpt15b_at_1_5p_meets_the_reference() -> None:
    # Issue 11: ours 1208.7 against the reference heuristic's 1187.6 at --memory-limit 12.
    data = json.loads((ROOT / "profiles" / "gpt1.5b-p8-m24.json").read_text())
    schedule = solve(parse_profile({**data, "memory_limit": 12}))
    assert schedule.metrics is not None
    assert schedule.metrics.cost <= 1187.6 + 1e-6


@pytest.mark.parametrize("seed", range(40))
def test_w_fill_leaves_no_gap_a_w_fits(seed: int) -> None:
    # The W fill (rule 2 of the heuristic and of the paper): no rank idles for a whole
    # W's time while it owes a W, in any build of the search.
    rng = random.Random(1000 + seed)
    orders: list[list[list[Op]]] = []
    while not orders:  # draw until some build fits the profile's limit
        problem = parse_profile(random_profile(rng)).problem
        builds = [build(problem, Knobs(w, fill, cooldown, balance))
                  for w in list(dict.fromkeys(warmup_candidates(problem)))[:3]
                  for fill in FILL_CHOICES for cooldown in range(3)
                  for balance in (False, True)]
        orders = [b.orders for b in builds if b.cost < float("inf")]
        orders += [b.orders for b in paper_candidates(problem)]
    for order in orders:
        sim = simulate(problem, order)
        assert sim.ok, sim.violations[:1]
        for r, ops in enumerate(order):
            owed = 0
            for i, op in enumerate(ops):
                if i > 0:
                    gap = sim.start[r][i] - sim.end[r][i - 1]  # type: ignore[operator]
                    assert not (owed and gap >= problem.t_w[op.stage] + 1e-9), (r, i, gap)
                owed += {"B": 1, "W": -1}.get(op.kind, 0)


@pytest.mark.parametrize("seed", range(30))
def test_time_order_is_the_simulators(seed: int) -> None:
    # The fallbacks are timed by order_timing.time_order: the simulator's figures, None
    # over the limit, and never a give-up when the order beats the incumbent.
    problem = parse_profile(random_profile(random.Random(2000 + seed))).problem
    k = max_in_flight(problem)
    for orders in (one_f_one_b_capped(problem, k), zb_h1(problem), zb_h2(problem),
                   *(b.orders for b in paper_candidates(problem))):
        sim = simulate(problem, orders)
        timed = time_order(problem, orders)
        fits = all(x <= cap + 1e-9 for x, cap in
                   zip(peak_memory(problem, orders), problem.memory_limit, strict=True))
        if not fits:
            assert timed is None
            continue
        assert sim.metrics is not None and timed == (sim.metrics.cost, sim.metrics.makespan)
        for objective, value in zip(("cost", "makespan"), timed, strict=True):
            assert time_order(problem, orders, objective, value + 1.01 * MARGIN) == timed
            assert time_order(problem, orders, objective, value) in (timed, None)


def test_local_search_moves_and_stops() -> None:
    problem = parse_profile(REGRESSION).problem
    start = zb_heuristic(problem)
    assert start.cost == pytest.approx(33.5)  # the knob search alone misses the optimum
    improved = improve(problem, start.orders)
    assert improved is not None
    orders, value = improved
    assert value == pytest.approx(32.5)
    assert simulate(problem, orders).metrics.cost == pytest.approx(32.5)  # type: ignore[union-attr]
    # At the bound there is nothing to search; with no budget nothing is tried.
    assert improve(problem, orders) is None
    assert improve(problem, start.orders, budget_ops=18) is None
