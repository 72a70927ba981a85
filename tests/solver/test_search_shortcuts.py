"""The heuristic search's shortcuts (issue 11: speed) change no answer: a build gives up
only when it cannot win (solver/heuristic/early_stop.py), knobs skipped as copies build the same
orders, and a warm-up copied from `forwards_only` is the one placed op by op."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path

import ppsched.solver.heuristic.build as build_module
import ppsched.solver.heuristic.paper as paper_module
import ppsched.solver.heuristic.search as heuristic_module
import pytest
from ppsched.solver.generators.classic import one_f_one_b_capped, one_f_one_b_warmup
from ppsched.solver.generators.zero_bubble import zb_h1, zb_h1_warmup, zb_h2, zb_h2_warmup
from ppsched.solver.heuristic.build import build
from ppsched.solver.heuristic.early_stop import (
    MARGIN,
    cannot_win,
    idle_cap,
    is_checkpoint,
    warm_up_floor,
)
from ppsched.solver.heuristic.knobs import FILL_CHOICES, Build, Knobs
from ppsched.solver.heuristic.order_timing import time_order
from ppsched.solver.heuristic.paper import paper_candidates
from ppsched.solver.heuristic.search import memory_caps, warmup_candidates, zb_heuristic
from ppsched.solver.heuristic.warm_up import forwards_only
from ppsched.solver.model.ops import Op
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import simulate

from tests.solver.test_heuristic_robust import random_profile

ROOT = Path(__file__).resolve().parents[2]
OBJECTIVES = ("cost", "makespan")


def _problems(seed: int, count: int) -> list[Problem]:
    rng = random.Random(seed)
    return [parse_profile(random_profile(rng)).problem for _ in range(count)]


def _knobs(problem: Problem) -> list[Knobs]:
    fused = tuple(w > b for w, b in zip(problem.m_w, problem.m_b, strict=True))
    return [Knobs(w, fill, cooldown, balance, b_first, f)
            for w in list(dict.fromkeys(warmup_candidates(problem)))[:3]
            for fill in FILL_CHOICES[::2] for cooldown in range(3) for balance in (False, True)
            for b_first in (False, True) for f in ((), fused) if f != () or not any(fused)]


def test_checkpoints() -> None:
    assert [i for i in range(20) if is_checkpoint(i, 20)] == [1, 2, 4, 8, 12, 16, 18, 19]
    assert [i for i in range(3) if is_checkpoint(i, 3)] == [1, 2]


def test_cannot_win_keeps_half_the_margin() -> None:
    assert cannot_win([10.0, 12.0], [0.0, 1.0], "cost", 11.0)
    assert not cannot_win([10.0, 12.0], [0.0, 1.0], "cost", 11.0 + MARGIN)
    assert cannot_win([10.0, 12.0], [0.0, 1.0], "makespan", 12.0)
    assert not cannot_win([10.0, 12.0], [0.0, 1.0], "makespan", 12.0 + MARGIN)


@pytest.mark.parametrize("seed", range(6))
def test_a_build_that_wins_never_gives_up(seed: int) -> None:
    # Against an incumbent just above its result, a build runs to the end unchanged; at
    # the incumbent itself (a tie, which the search refuses) it may give up.
    for problem in _problems(seed, 4):
        for knobs in _knobs(problem):
            full = build(problem, knobs)
            if not math.isfinite(full.cost):
                continue
            for objective in OBJECTIVES:
                value = full.objective(objective)
                kept = build(problem, knobs, value + MARGIN * 1.01, objective)
                assert kept.objective(objective) == value
                assert kept.orders == full.orders
                tied = build(problem, knobs, value, objective)
                assert tied.objective(objective) in (value, math.inf)


def test_idle_cap_is_above_the_incumbent() -> None:
    assert idle_cap(2000.0) > 2000.0 + MARGIN
    assert idle_cap(0.0) > 0.0
    assert idle_cap(math.inf) == math.inf


def test_a_build_gives_up_when_a_stage_idles_too_long(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # With no checkpoint at all, a losing build still gives up: the stage that idles
    # past the incumbent stops it (the refinement's losers idle half-way, issue 11).
    # Its result is then the one the search would refuse anyway.
    monkeypatch.setattr(build_module, "is_checkpoint", lambda *args: False)
    problem = _paper_problems()[0]
    forwards = forwards_only(problem, min(problem.num_microbatches,
                                          max(memory_caps(problem))))
    best = zb_heuristic(problem)
    assert best.knobs is not None
    stopped = 0
    for knobs in _knobs(problem):
        full = build(problem, knobs, forwards=forwards)
        against = build(problem, knobs, best.cost, forwards=forwards)
        if math.isinf(against.cost):
            stopped += 1
            assert full.cost >= best.cost - MARGIN  # it could not have won
        else:
            assert (against.cost, against.orders) == (full.cost, full.orders)
    assert stopped > 0


def test_a_fixed_order_gives_up_when_a_rank_idles_too_long() -> None:
    # Two ranks, one microbatch, a long link: rank 0 waits 200 for its B's input, so
    # the order costs about 203. It is all timed in the first sweep, before any
    # checkpoint; against an incumbent of 10 the idle rank alone drops it.
    problem = parse_profile({"num_ranks": 2, "num_microbatches": 1, "t_f": 1, "t_b": 1,
                             "t_w": 1, "t_comm": 100, "m_b": 1, "m_w": 0.5}).problem
    orders = [[Op("F", r, 0), Op("B", r, 0), Op("W", r, 0)] for r in range(2)]
    metrics = simulate(problem, orders).metrics
    assert metrics is not None
    assert time_order(problem, orders) == (metrics.cost, metrics.makespan)
    assert time_order(problem, orders, "cost", metrics.cost + 1.01 * MARGIN) is not None
    assert time_order(problem, orders, "cost", 10.0) is None


@pytest.mark.parametrize("seed", range(10))
def test_paper_runs_that_win_are_all_yielded(seed: int) -> None:
    for problem in _problems(100 + seed, 6):
        every = list(paper_candidates(problem))
        for objective in OBJECTIVES:
            for bar in {x.objective(objective) for x in every}:
                kept = list(paper_candidates(problem, objective, lambda bar=bar: bar))
                winners = [x for x in every if x.objective(objective) < bar - MARGIN]
                assert [x.orders for x in winners] == \
                    [x.orders for x in kept if x.objective(objective) < bar - MARGIN]
                assert all(x.orders in [y.orders for y in every] for x in kept)


@pytest.mark.parametrize("seed", range(6))
def test_warm_up_floor_holds_for_the_fixed_orders(seed: int) -> None:
    # The fallbacks are dropped ungenerated where this floor says they cannot win: it
    # must never exceed what they cost.
    checked = 0
    for problem in _problems(300 + seed, 8):
        p, m = problem.num_ranks, problem.num_microbatches
        fixed = [(zb_h1(problem), zb_h1_warmup(p)), (zb_h2(problem), zb_h2_warmup(p))]
        fixed += [(one_f_one_b_capped(problem, k), one_f_one_b_warmup(p, k, m))
                  for k in range(1, p + 1)]
        for orders, warmup in fixed:
            metrics = simulate(problem, orders).metrics
            if metrics is None:
                continue  # deadlocked: never a candidate
            floor = warm_up_floor(problem, warmup)
            assert floor <= metrics.cost + 1e-9 <= metrics.makespan + 2e-9
            checked += floor > problem.simple_lower_bound
    assert checked > 0  # the floor is above the op time somewhere


def _without_early_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    never = lambda *args: False  # noqa: E731
    monkeypatch.setattr(build_module, "cannot_win", never)
    monkeypatch.setattr(paper_module, "cannot_win", never)
    monkeypatch.setattr(heuristic_module, "warm_up_floor", lambda *args: 0.0)
    monkeypatch.setattr(build_module, "idle_cap", lambda incumbent: math.inf)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_heuristic_answers_are_those_without_early_stop(
        objective: str, monkeypatch: pytest.MonkeyPatch) -> None:
    problems = _problems(7, 40) + _paper_problems()
    fast = [zb_heuristic(problem, objective) for problem in problems]
    _without_early_stop(monkeypatch)
    slow = [zb_heuristic(problem, objective) for problem in problems]
    assert [(x.cost, x.makespan, x.orders) for x in fast] == \
        [(x.cost, x.makespan, x.orders) for x in slow]


@pytest.mark.parametrize("seed", range(6))
def test_knobs_whose_fill_rule_decides_alike_build_it_again(seed: int) -> None:
    # The search skips knobs whose fill rule (fill, cooldown, balance) decides as a done
    # build's did at each of its decisions (Build.decides_alike): they build the same
    # orders.
    checked = told_apart = 0
    for problem in _problems(200 + seed, 5):
        for knobs in _knobs(problem):
            built = build(problem, knobs, record=True)
            assert built.decides_alike((knobs.fill, knobs.cooldown, knobs.balance))
            # (fill 0 with balance: a threshold of 0, where balance is never read)
            for other in [*_knobs(problem), replace(knobs, fill=0.0, balance=True)]:
                same_rest = (other.warmup, other.b_first_when_capped, other.fused) == \
                    (knobs.warmup, knobs.b_first_when_capped, knobs.fused)
                rule = (other.fill, other.cooldown, other.balance)
                if other == knobs or not same_rest:
                    continue
                again = build(problem, other)
                if not built.decides_alike(rule):
                    told_apart += (again.cost, again.orders if math.isfinite(again.cost)
                                else None) != (built.cost, built.orders
                                               if math.isfinite(built.cost) else None)
                    continue
                assert (again.cost, again.makespan) == (built.cost, built.makespan)
                if math.isfinite(built.cost):
                    assert again.orders == built.orders
                checked += 1
    assert checked > 0 and told_apart > 0  # both occur: the rules tell builds apart


def test_tied_fill_rules_are_not_built_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # gpt1.5b-p8-m24 at 2p: of the 18 fill rules on the first warm-up, only 4 build
    # distinct orders; the search builds each at most once (issue 11: speed).
    problem = _paper_problems()[0]
    built: list[Knobs] = []
    real = heuristic_module.build

    def counting(problem: Problem, knobs: Knobs, *args: object,
                 **kwargs: object) -> Build:
        built.append(knobs)
        return real(problem, knobs, *args, **kwargs)  # type: ignore[arg-type]

    before = zb_heuristic(problem)
    monkeypatch.setattr(heuristic_module, "build", counting)
    after = zb_heuristic(problem)
    assert (after.cost, after.orders) == (before.cost, before.orders)
    first = built[0].warmup
    rules = [(k.fill, k.cooldown, k.balance) for k in built if k.warmup == first]
    assert len(rules) == len(set(rules)) <= 4, rules


def _paper_problems() -> list[Problem]:
    problems = []
    for name, multiple in (("gpt1.5b-p8-m24", 2), ("gpt6.2b-p8-m32", 1.5),
                           ("hetero-p8-m32", 2)):
        data = json.loads((ROOT / "profiles" / f"{name}.json").read_text())
        problems.append(parse_profile({**data, "memory_limit": data["memory_limit"]
                                       * multiple}).problem)
    return problems


@pytest.mark.parametrize("seed", range(7))
def test_a_copied_warm_up_builds_the_same(seed: int) -> None:
    for problem in _problems(300 + seed, 5) if seed < 6 else _paper_problems():
        forwards = forwards_only(problem, min(problem.num_microbatches,
                                              max(memory_caps(problem))))
        depth = len(forwards.f_end[0])  # all stages at the deepest: over some limits
        for knobs in [*_knobs(problem), Knobs((depth,) * problem.num_ranks, 0.5)]:
            assert forwards.covers(knobs.warmup)
            placed = build(problem, knobs, record=True)
            copied = build(problem, knobs, forwards=forwards, record=True)
            assert (copied.cost, copied.makespan, copied.decisions) == \
                (placed.cost, placed.makespan, placed.decisions)
            if math.isfinite(placed.cost):
                assert copied.orders == placed.orders
    # Counts that grow down the pipeline read forwards no warm-up placed: not copied.
    assert not forwards.covers((1, 2)) and not forwards.covers((0, 0))


def test_a_paper_run_gives_up_when_a_stage_idles_too_long(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # With no checkpoint at all, a losing paper run still gives up once a stage has
    # idled past the incumbent (`idle_cap`); the runs that win are the full runs.
    monkeypatch.setattr(paper_module, "is_checkpoint", lambda *args: False)
    stopped = 0
    for problem in _paper_problems():
        runs = [paper_module.paper_build(problem, flags) for flags in paper_module.FLAGS]
        costs = [run.cost for run in runs if run is not None]
        bar = sorted(costs)[len(costs) // 2]  # the median run's cost: some lose
        for flags, full in zip(paper_module.FLAGS, runs, strict=True):
            against, _ = paper_module._paper_run(problem, flags, "cost", bar)
            if against is None and full is not None:
                stopped += 1
                assert full.cost >= bar - MARGIN  # it could not have won
            elif full is not None and full.cost < bar - MARGIN:
                assert against is not None and against.codes == full.codes
    assert stopped > 0


@pytest.mark.parametrize("seed", range(4))
def test_paper_flags_a_run_did_not_read_build_it_again(seed: int) -> None:
    # A flag is read only where flipping it changes a decision: a combination that
    # agrees with a run on every flag that run read builds the very same orders.
    problems = _problems(200 + seed, 12) + (_paper_problems() if seed == 0 else [])
    copies = 0
    for problem in problems:
        runs = {flags: paper_module._paper_run(problem, flags) for flags in paper_module.FLAGS}
        for flags, (built, read) in runs.items():
            for other, (again, _) in runs.items():
                if other != flags and all(getattr(flags, name) == getattr(other, name)
                                          for name in read):
                    copies += 1
                    assert (built is None) == (again is None)
                    if built is not None and again is not None:
                        assert built.codes == again.codes
    assert copies > 0


def _candidates_from_scratch(problem: Problem) -> list[tuple[paper_module.PaperFlags, list]]:
    """`paper_candidates` without an incumbent, each run from its first op."""
    done: list[tuple[paper_module.PaperFlags, frozenset[str]]] = []
    out = []
    for flags in paper_module.FLAGS:
        if any(all(getattr(flags, n) == getattr(seen, n) for n in read) for seen, read in done):
            continue
        built, read = paper_module._paper_run(problem, flags)
        done.append((flags, read))
        if built is not None:
            out.append((flags, built.codes))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_a_paper_run_resumed_where_greedy_w_was_first_read_builds_as_from_scratch(
        seed: int) -> None:
    # The run with greedy_w flipped resumes from the state its twin had at the start of
    # the wave where the twin first read the flag; it builds what a run from scratch
    # builds, so the candidates are the same.
    problems = _problems(300 + seed, 12) + (_paper_problems() if seed == 0 else [])
    resumed = 0
    original = paper_module._Run.resumed

    def counting(self: object, *args: object) -> object:
        nonlocal resumed
        resumed += 1
        return original(self, *args)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(paper_module._Run, "resumed", counting)
        for problem in problems:
            got = [(x.flags, x.codes) for x in paper_candidates(problem)]
            assert got == _candidates_from_scratch(problem)
    assert resumed > 0


def test_a_build_its_warm_up_dooms_is_not_built() -> None:
    # `Forwards.cannot_win` reads the floor off the forwards-only table before a build
    # allocates anything: where it says so, the whole build cannot beat the bar.
    cut = 0
    for problem in _problems(400, 30) + _paper_problems():
        forwards = forwards_only(problem, min(problem.num_microbatches,
                                              max(memory_caps(problem))))
        full = {knobs: build(problem, knobs, forwards=forwards) for knobs in _knobs(problem)}
        costs = sorted(x.cost for x in full.values() if math.isfinite(x.cost))
        if not costs:
            continue
        for bar in (costs[0], costs[len(costs) // 2]):
            for knobs, whole in full.items():
                if forwards.covers(knobs.warmup) and forwards.cannot_win(
                        problem, knobs.warmup, knobs.fused, "cost", bar):
                    cut += 1
                    assert whole.cost >= bar - MARGIN
                    assert math.isinf(build(problem, knobs, bar, forwards=forwards).cost)
    assert cut > 0
