"""The Zero Bubble automatic heuristic's knob search (Qi et al. 2024, section 3.1).

One build (`heuristic.build`) is the paper's recipe for one choice of knobs
(`heuristic.knobs.Knobs`): a warm-up of forwards per stage, 1F1B waves with Ws filling
the gaps, and a cool-down of the Ws still owed. The search here tries warm-up families,
fill rules and cool-down rules, refines the warm-up counts, and keeps the best build, the
fixed fallbacks and the paper's algorithm as candidates; only the winner is re-timed and
validated by the simulator.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
from collections.abc import Callable, Iterator

from ppsched.solver.generators.classic import one_f_one_b_capped, one_f_one_b_warmup
from ppsched.solver.generators.zero_bubble import zb_h1, zb_h1_warmup, zb_h2, zb_h2_warmup
from ppsched.solver.heuristic.build import build
from ppsched.solver.heuristic.early_stop import MARGIN, warm_up_floor
from ppsched.solver.heuristic.knobs import (
    COOLDOWN_B_FIRST,
    COOLDOWN_GREEDY,
    COOLDOWN_HEAD_START,
    FILL_CHOICES,
    Build,
    Knobs,
)
from ppsched.solver.heuristic.order_timing import time_order
from ppsched.solver.heuristic.paper import PaperBuild, paper_candidates
from ppsched.solver.heuristic.scale import LARGE_WARMUP_FAMILIES, searched_in_full
from ppsched.solver.heuristic.warm_up import forwards_only
from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.ops import Orders
from ppsched.solver.model.problem import Problem

log = logging.getLogger(__name__)
_EPS = 1e-9

# How many ops the warm-up refinement may build in all (about 0.15 s of builds here).
REFINE_BUDGET_OPS = 250_000


def zb_heuristic(problem: Problem, objective: str = "cost") -> Build:
    """The best order the heuristic finds for `problem`, by `objective` (cost or makespan).

    The search builds every warm-up family of `warmup_candidates` with the first fill
    threshold (and, where memory caps neighbouring stages alike, with those stages taking
    B before F); for the best it tries the other fill thresholds, the bubble balance and
    the cool-down rules; then it moves the warm-up count of one stage at a
    time while that helps (within `REFINE_BUDGET_OPS`). The 1F1B capped at what the
    memory limit allows, ZB-H1 and ZB-H2 are candidates too where they fit the limit, and
    so is the paper's algorithm as the paper states it (`solver.generators.paper`), which
    runs first: where it meets the lower bound the search is skipped, and each phase is
    skipped once the best meets it. The lowest objective wins (ties: the first found).
    Two shortcuts leave the answer unchanged: a build (or paper run, or fallback) gives
    up once it provably cannot beat the best so far (`solver.early_stop`), and knobs
    that would repeat a done build op for op (`Build.decides_alike`) are not built.

    Raises:
        ProfileError: for more than one chunk per rank (the heuristic is single-chunk).
    """
    if problem.num_chunks != 1:
        raise ProfileError("num_chunks", problem.num_chunks,
                           "1 for the zb heuristic (several chunks per rank: use a named "
                           "schedule)")

    # The paper's algorithm as the paper states it: the floor the search never goes under.
    # It is cheap, so it runs first: where it already meets the lower bound (so no
    # schedule is better), the search stops there. Runs that cannot meet the bound give
    # up early (`solver.early_stop`), and run again after the search against its best.
    bound = lower_bound(problem)  # holds for cost and makespan (makespan >= cost)
    for paper in paper_candidates(problem, objective, lambda: bound + 2 * _EPS):
        if paper.objective(objective) <= bound + _EPS:
            return _from_paper(paper)
    search = _Search(problem, objective)
    # Each phase only keeps strictly better builds: once one meets the bound, the rest
    # cannot change the answer and are skipped.
    for phase in (search.warmup_families, search.variants, search.refine_warmups,
                  search.fused_backwards):
        if search.value > bound + _EPS:
            phase()
    for candidate in _fallbacks(problem, objective, lambda: search.value):
        search.offer(candidate)
    for paper in paper_candidates(problem, objective, lambda: search.value):
        search.offer(_from_paper(paper))
    best = search.best
    assert best is not None  # the capped 1F1B always fits the limit
    log.debug("heuristic: best %s %s cost %.4f", best.source, best.knobs, best.cost)
    return best


def _from_paper(paper: PaperBuild) -> Build:
    return Build(paper.cost, paper.makespan, "zb-paper", codes=paper.codes,
                 num_microbatches=paper.num_microbatches)


class _Search:
    """The knob search's phases and its incumbent (lowest objective; ties: first found)."""

    def __init__(self, problem: Problem, objective: str) -> None:
        self.problem, self.objective = problem, objective
        self.best: Build | None = None
        self.best_knobs = Knobs((), FILL_CHOICES[0])
        self.caps = memory_caps(problem)
        # Builds done, by the knobs no decision records (warm-up, B first, fused).
        self.done: dict[tuple, list[Build]] = {}
        self.recording = True  # whether builds record their decisions (`try_knobs`)
        self.forwards = forwards_only(problem, min(problem.num_microbatches, max(self.caps)))

    @property
    def value(self) -> float:
        return self.best.objective(self.objective) if self.best else math.inf

    def offer(self, candidate: Build, knobs: Knobs | None = None) -> bool:
        """Keep `candidate` if it beats the incumbent (with its knobs, if it has them)."""
        if self.best is None or candidate.objective(self.objective) < self.value - _EPS:
            self.best = candidate
            if knobs is not None:
                self.best_knobs = knobs
            return True
        return False

    def try_knobs(self, knobs: Knobs) -> bool:
        # A copy of a build done before (its fill rule decides alike at every decision
        # that build made) would end as that one did: refused, or given up. Not built.
        same = self.done.setdefault((knobs.warmup, knobs.b_first_when_capped, knobs.fused),
                                    [])
        rule = (knobs.fill, knobs.cooldown, knobs.balance)
        if any(seen.decides_alike(rule) for seen in same):
            return False
        # A build that cannot beat the incumbent stops early: offer() would refuse it.
        # Only the first phases try other fill rules on a warm-up already built: their
        # builds record their decisions.
        built = build(self.problem, knobs, self.value, self.objective, self.forwards,
                      record=self.recording)
        same.append(built)
        return self.offer(built, knobs)

    def warmup_families(self) -> None:
        """Every warm-up family with the first fill threshold."""
        problem, caps = self.problem, self.caps
        # Below 1F1B's memory (some stage cannot hold the p - j microbatches 1F1B has in
        # flight there), stages capped alike may take B before F: try both there.
        below_1f1b = any(cap < problem.num_ranks - j for j, cap in enumerate(caps))
        families = list(dict.fromkeys(warmup_candidates(problem)))  # unique, in order
        if not searched_in_full(problem):  # a large order: the first families only
            families = families[:LARGE_WARMUP_FAMILIES]
        for warmup in families:
            capped = below_1f1b and any(a == b for a, b in itertools.pairwise(warmup))
            for b_first in (False, True) if capped else (False,):
                self.try_knobs(Knobs(warmup, FILL_CHOICES[0], b_first_when_capped=b_first))

    def variants(self) -> None:
        """For the best warm-up: the other fill thresholds, balance and cool-down rules."""
        variants = [(fill, False) for fill in FILL_CHOICES] + [(FILL_CHOICES[0], True)]
        for fill, balance in variants:
            for cooldown in (COOLDOWN_GREEDY, COOLDOWN_HEAD_START, COOLDOWN_B_FIRST):
                knobs = dataclasses.replace(self.best_knobs, fill=fill, cooldown=cooldown,
                                            balance=balance)
                if knobs != self.best_knobs:
                    self.try_knobs(knobs)

    def refine_warmups(self) -> None:
        """Coordinate descent on the per-stage warm-up counts, within a budget of ops
        built so that the answer does not depend on the machine's speed."""
        problem = self.problem
        self.recording = False  # from here on each warm-up is built with one fill rule
        budget = REFINE_BUDGET_OPS // (3 * problem.num_stages * problem.num_microbatches)
        improved = True
        while improved and budget > 0:
            improved = False
            for warmup in _neighbours(self.best_knobs.warmup, self.caps):
                if budget <= 0:
                    break
                budget -= 1
                if self.try_knobs(dataclasses.replace(self.best_knobs, warmup=warmup)):
                    improved = True
                    break

    def fused_backwards(self) -> None:
        """Where m_w > m_b, a fused backward holds less: the best knobs with those stages
        fused, from every warm-up family."""
        problem = self.problem
        fused = tuple(w > b for w, b in zip(problem.m_w, problem.m_b, strict=True))
        if any(fused) and any(map(math.isfinite, problem.memory_limit)):
            families = (self.best_knobs.warmup, *warmup_candidates(problem))
            for warmup in dict.fromkeys(families):
                self.try_knobs(dataclasses.replace(self.best_knobs, warmup=warmup,
                                                   fused=fused))


def _neighbours(warmup: tuple[int, ...], caps: list[int]) -> Iterator[tuple[int, ...]]:
    """Warm-ups one F more or less on one stage, still non-increasing and within memory."""
    for j in range(len(warmup)):
        for delta in (1, -1):
            k = warmup[j] + delta
            if 1 <= k <= caps[j] and (j == 0 or k <= warmup[j - 1]) \
                    and (j == len(warmup) - 1 or k >= warmup[j + 1]):
                yield (*warmup[:j], k, *warmup[j + 1:])


def _fallbacks(problem: Problem, objective: str, incumbent: Callable[[], float],
               ) -> Iterator[Build]:
    """Fixed schedules that are candidates when they fit: the floor under the search.

    Each is timed by `order_timing.time_order`, which drops it at its first op over the
    memory limit or once it cannot beat `incumbent()` (the best so far).
    """
    k, p, m = max_in_flight(problem), problem.num_ranks, problem.num_microbatches
    fixed: list[tuple[str, Callable[[], Orders], list[int]]] = [
        (f"1f1b-capped-{k}", lambda: one_f_one_b_capped(problem, k),
         one_f_one_b_warmup(p, k, m)),
        ("zb-h1", lambda: zb_h1(problem), zb_h1_warmup(p)),
        ("zb-h2", lambda: zb_h2(problem), zb_h2_warmup(p))]
    for name, generate, warmup in fixed:
        if warm_up_floor(problem, warmup) >= incumbent() - MARGIN / 2:
            continue  # its warm-up idles too long: `time_order` would give up on it
        orders = generate()
        timed = time_order(problem, orders, objective, incumbent())
        if timed is not None:
            yield Build(*timed, name, given_orders=orders)


def memory_caps(problem: Problem) -> list[int]:
    """Per stage, the most forwards whose activations fit the rank's limit at once."""
    m = problem.num_microbatches
    caps = []
    for s in range(problem.num_stages):
        limit, m_b = problem.memory_limit[s], problem.m_b[s]
        caps.append(m if m_b <= 0 or math.isinf(limit)
                    else max(1, min(m, int(limit / m_b + _EPS))))
    return caps


def max_in_flight(problem: Problem) -> int:
    """The largest k such that 1F1B capped at k microbatches in flight fits every rank."""
    caps = memory_caps(problem)
    return max(1, min(problem.num_ranks, *caps))


def warmup_candidates(problem: Problem) -> Iterator[tuple[int, ...]]:
    """Warm-up count vectors to try, each capped by memory and made non-increasing.

    - "fit": each stage runs the forwards that end before its first B can arrive, the
      paper's rule of as many Fs as memory allows before the first B;
    - "cover": one forward more where that leaves the rank idle before the first B;
    - the 1F1B family ``k + (p-1-j)`` and the ZB-H2 family ``k + 2(p-1-j)``.
    """
    p, caps = problem.num_ranks, memory_caps(problem)

    def shaped(raw: list[int]) -> tuple[int, ...]:
        out, bound = [], problem.num_microbatches
        for j, k in enumerate(raw):
            bound = max(1, min(bound, caps[j], k))
            out.append(bound)
        return tuple(out)

    yield shaped(_first_b_fit(problem, caps, cover=False))
    yield shaped(_first_b_fit(problem, caps, cover=True))
    for base in (1, 2, 3):
        yield shaped([base + (p - 1 - j) for j in range(p)])
        yield shaped([base + 2 * (p - 1 - j) for j in range(p)])


def _first_b_fit(problem: Problem, caps: list[int], cover: bool) -> list[int]:
    """Warm-up counts from the first microbatch's round trip (stages are ranks here).

    ``f_end[j][x]`` is the earliest end of F(j, x) when stages run only forwards; stage j
    then takes the forwards that end before B(j, 0) can start, and with `cover` one more
    if the rank would otherwise idle.
    """
    p, m = problem.num_ranks, problem.num_microbatches
    depth = min(m, max(caps))
    f_end = [[0.0] * depth for _ in range(p)]
    for j in range(p):
        t = 0.0
        for x in range(depth):
            ready = f_end[j - 1][x] + problem.t_comm[j - 1] if j > 0 else 0.0
            t = max(t, ready) + problem.t_f[j]
            f_end[j][x] = t
    counts = [1] * p
    b_end = f_end[p - 1][0] + problem.t_b[p - 1]
    for j in range(p - 2, -1, -1):
        arrive = b_end + problem.t_comm[j]
        k = 1
        while k < min(caps[j], depth) and f_end[j][k] <= arrive + _EPS:
            k += 1
        if cover and k < min(caps[j], depth) and f_end[j][k - 1] < arrive - _EPS:
            k += 1
        counts[j] = k
        b_end = max(f_end[j][k - 1], arrive) + problem.t_b[j]
    return counts
