"""The Zero Bubble automatic heuristic (Qi et al. 2024, section 3.1), with a search over
its knobs.

One build is the paper's recipe for one choice of knobs:

1. Warm-up: stage j runs ``warmup[j]`` forwards before its first B; counts never grow
   down the pipeline (stage j schedules at least as many Fs as stage j+1).
2. Main step: 1F1B, one F and one B per stage per wave; wave i places the Fs in stage
   order (each F's input is then already timed) and the B of microbatch i in reverse
   stage order (each B's gradient is then already timed). Before an op whose input
   arrives later than the rank is free, Ws fill the gap: every W that fits, and one more
   that overruns it when the gap is at least ``fill`` of a W (or, with ``balance``, when
   idling would make this stage the most idle one). Before an F, Ws also run while the
   F would break the memory limit.
3. Cool-down: the remaining Ws, in microbatch order.

Because every op is placed after its dependency, a build times itself exactly as the
simulator does (list scheduling), so the search compares builds by their own cost and
only the winner is re-timed and validated by the simulator.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

from ppsched.solver.generators.classic import one_f_one_b_capped, one_f_one_b_warmup
from ppsched.solver.generators.zero_bubble import zb_h1, zb_h1_warmup, zb_h2, zb_h2_warmup
from ppsched.solver.heuristic.early_stop import (
    MARGIN,
    cannot_win,
    idle_cap,
    is_checkpoint,
    stage_floors,
    warm_up_floor,
)
from ppsched.solver.heuristic.order_timing import time_order
from ppsched.solver.heuristic.paper import PaperBuild, paper_candidates
from ppsched.solver.heuristic.warm_up import Forwards, forwards_only
from ppsched.solver.model.bounds import lower_bound
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.ops import Kind, Op, Orders
from ppsched.solver.model.problem import Problem

log = logging.getLogger(__name__)
_new_tuple = tuple.__new__

_EPS = 1e-9
FILL_CHOICES = (0.2, 0.5, 1.0)
COOLDOWN_GREEDY, COOLDOWN_HEAD_START, COOLDOWN_B_FIRST = range(3)
FillRule = tuple[float, int, bool]
"""The knobs the W fill's decisions read: (fill, cooldown, balance)."""
Decision = tuple[int, bool, bool, float, float, float]
"""What a W fill decision sees (the arguments of `_stops` after the rule)."""


@dataclass(frozen=True)
class Decisions:
    """What the W fill decisions of one build saw, and how it decided each.

    Attributes:
        main: (what it saw, whether it stopped) at each decision of a stage before its
            last F, which reads the fill and balance knobs only.
        cooldown: the same past a stage's last F (stages after the first: stage 0 then
            runs every W, whatever the knobs).
    """

    main: list[tuple[Decision, bool]] = dataclasses.field(default_factory=list)
    cooldown: list[tuple[Decision, bool]] = dataclasses.field(default_factory=list)

    def add(self, seen: Decision, stop: bool) -> None:
        """Record a decision (stage 0 past its last F runs every W: nothing to record)."""
        stage, past_last_f = seen[0], seen[1]
        if not past_last_f:
            self.main.append((seen, stop))
        elif stage > 0:
            self.cooldown.append((seen, stop))

    def alike(self, own: FillRule, rule: FillRule) -> bool:
        """Whether `rule` decides each of them as `own` did."""
        # Before a stage's last F the threshold is the fill: two rules with balance and
        # fills above 0 decide alike, and so do two with the same fill and balance.
        fill, _, balance = rule
        main_alike = (own[2] and balance and own[0] > 0.0 and fill > 0.0) \
            or (own[0], own[2]) == (fill, balance)
        if not main_alike:
            # `_stops` before the last F, inlined (the threshold is the fill): these
            # decisions are the most, and this runs for every knob the search tries.
            if balance and fill > 0.0:
                if any((seen[3] <= seen[5]) != stop for seen, stop in self.main):
                    return False
            elif any((seen[3] < fill * seen[4]) != stop for seen, stop in self.main):
                return False
        return all(_stops(rule, *seen) == stop for seen, stop in self.cooldown)
# How many ops the warm-up refinement may build in all (about 0.15 s of builds here).
REFINE_BUDGET_OPS = 250_000


@dataclass(frozen=True)
class Knobs:
    """One point of the heuristic's search space.

    Attributes:
        warmup: forwards before the first B, per stage (non-increasing down the pipeline).
        fill: a W that would overrun an idle gap is still inserted when the gap is at
            least this fraction of the W's time (1.0: only Ws that fit whole).
        cooldown: past its last F, what a stage other than the first does with Ws:
            ``COOLDOWN_GREEDY`` fills as in the main step; ``COOLDOWN_HEAD_START`` keeps
            its Bs flowing (whole Ws only) while its backlog of Ws fits in the head start
            it has on stage 0; ``COOLDOWN_B_FIRST`` always inserts whole Ws only.
    """

    warmup: tuple[int, ...]
    fill: float
    cooldown: int = COOLDOWN_GREEDY
    balance: bool = False
    b_first_when_capped: bool = False
    fused: tuple[bool, ...] = ()
    """Per stage, whether its backward runs fused (BW, no W held): where m_w > m_b and the
    limit is tight, a split B would need room that a BW does not (DESIGN.md 6.1)."""


@dataclass(frozen=True)
class Build:
    """One candidate order with its cost as the build timed it.

    A build keeps its ops as ints (``kind * m + microbatch``, kinds F, B, W, BW = 0, 1, 2,
    3) and makes `Op`s only when its orders are asked for: most candidates lose.
    """

    cost: float
    makespan: float
    source: str
    codes: list[list[int]] | None = None
    given_orders: Orders | None = None
    num_microbatches: int = 0
    knobs: Knobs | None = None
    """The knobs of a knob search build (None for the other candidates)."""
    decisions: Decisions | None = None
    """What each W fill decision of the build saw, up to where it ended or gave up
    (None: not recorded): see `decides_alike`."""

    def decides_alike(self, rule: FillRule) -> bool:
        """Whether knobs that differ from this build's only in taking the W fill `rule`
        build it again, op for op: at each of its decisions the rule decides as its own
        did (and then a build with them ends or gives up where this one did)."""
        assert self.knobs is not None
        own = (self.knobs.fill, self.knobs.cooldown, self.knobs.balance)
        if rule == own:
            return True
        return self.decisions is not None and self.decisions.alike(own, rule)

    @cached_property
    def orders(self) -> Orders:
        if self.given_orders is not None:
            return self.given_orders
        assert self.codes is not None
        m = self.num_microbatches
        kinds: tuple[Kind, ...] = ("F", "B", "W", "BW")
        # tuple.__new__: what Op(...) does, without its Python-level __new__ (a third of
        # the time, for every op of the winner).
        return [[_new_tuple(Op, (kinds[c // m], j, c % m)) for c in row]
                for j, row in enumerate(self.codes)]

    def objective(self, name: str) -> float:
        return self.makespan if name == "makespan" else self.cost


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
        for warmup in dict.fromkeys(warmup_candidates(problem)):  # unique, in order
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


def _threshold(fill: float, cooldown: int, stage: int, past_last_f: bool,
               backlog_fits: bool) -> float:
    """The least gap, in Ws, into which the fill runs a W that overruns it."""
    if not past_last_f:
        return fill
    # Past its last F, stage 0 feeds no one: idling is never better than a W. A later
    # stage started later, so Ws it leaves to the end cost it nothing up to that head
    # start; meanwhile it may keep its Bs flowing to stage 0.
    if stage == 0:
        return 0.0
    if cooldown == COOLDOWN_B_FIRST:
        return 1.0
    if cooldown == COOLDOWN_HEAD_START:
        return 1.0 if backlog_fits else 0.0
    return fill


def _stops(rule: FillRule, stage: int, past_last_f: bool, backlog_fits: bool, gap: float,
           t_w: float, idle_slack: float) -> bool:
    """Whether the fill leaves a gap idle rather than overrun it with a W: with balance,
    when idling keeps this stage no more idle than the most idle one (`idle_slack`: how
    far it is behind that one)."""
    fill, cooldown, balance = rule
    threshold = _threshold(fill, cooldown, stage, past_last_f, backlog_fits)
    if balance and threshold > 0.0:
        return gap <= idle_slack
    return gap < threshold * t_w


def build(problem: Problem, knobs: Knobs, incumbent: float = math.inf,
          objective: str = "cost", forwards: Forwards | None = None,
          record: bool = False) -> Build:
    """Run the heuristic once with fixed knobs; see the module docstring for the steps.

    With a finite `incumbent`, the build gives up (cost and makespan infinite) as soon as
    its `objective` provably cannot beat it (`solver.early_stop`). With `forwards` (the
    problem's), the warm-up is copied from it rather than placed op by op. With
    `record`, the build keeps what its W fill decisions saw (`Build.decides_alike`).
    """
    if forwards is not None and math.isfinite(incumbent) and forwards.covers(knobs.warmup) \
            and forwards.cannot_win(problem, knobs.warmup, knobs.fused, objective, incumbent):
        # It would give up at its first checkpoint (and so would any fill rule on it).
        return _lost("cannot win", knobs, Decisions() if record else None)
    p, m = problem.num_ranks, problem.num_microbatches
    t_f, t_b, t_w = problem.t_f, problem.t_b, problem.t_w
    t_comm, m_b, m_w = problem.t_comm, problem.m_b, problem.m_w
    limit = problem.memory_limit
    fill, cooldown, balance = knobs.fill, knobs.cooldown, knobs.balance
    fused = knobs.fused or (False,) * p
    grows = [w > b for w, b in zip(m_w, m_b, strict=True)]  # a B adds memory (6.1)
    idle = [0.0] * p  # per stage, idle time since its first F
    busy = [m * (t_f[j] + t_b[j] + t_w[j]) for j in range(p)]  # per stage, its op time
    cap = idle_cap(incumbent)
    most_idle = [0.0]  # the largest of `idle`, kept as it only grows
    free = [0.0] * p
    first = [0.0] * p
    mem = [0.0] * p
    num_f, num_b, num_w = [0] * p, [0] * p, [0] * p
    f_end = [[0.0] * m for _ in range(p)]
    b_end = [[0.0] * m for _ in range(p)]
    # Ops as ints (kind * m + microbatch; kinds F, B, W = 0, 1, 2) until the end.
    codes: list[list[int]] = [[] for _ in range(p)]
    decisions = Decisions() if record else None

    def run_w(j: int) -> None:
        x = num_w[j]
        free[j] += t_w[j]
        mem[j] -= m_w[j]
        num_w[j] = x + 1
        codes[j].append(2 * m + x)

    def fill_gap(j: int, ready: float) -> None:
        # Ws into the idle time before `ready`: whole ones, then one that overruns a gap
        # of at least `fill` of a W (it delays the op, but idles the rank less).
        past_last_f = num_f[j] == m  # then the cool-down rule sets the threshold
        backlog_fits = past_last_f and (num_b[j] - num_w[j]) * t_w[j] <= first[j] - first[0]
        threshold = _threshold(fill, cooldown, j, True, backlog_fits) if past_last_f else fill
        t = t_w[j]
        x, owed, clock, row = num_w[j], num_b[j], free[j], codes[j]
        while x < owed:
            gap = ready - clock
            if gap <= _EPS:
                break
            if gap < t - _EPS:  # the W would overrun the gap: a decision (`_stops`)
                slack = most_idle[0] - idle[j]
                stop = gap <= slack if balance and threshold > 0.0 else gap < threshold * t
                if decisions is not None:
                    decisions.add((j, past_last_f, backlog_fits, gap, t, slack), stop)
                if stop:
                    break
            clock += t  # run_w, inlined: this loop is most of a build's W fill
            mem[j] -= m_w[j]
            row.append(2 * m + x)
            x += 1
        num_w[j], free[j] = x, clock

    def wait(j: int, start: float) -> None:  # the rank idles until `start`
        idle[j] += start - free[j]
        if idle[j] > most_idle[0]:
            most_idle[0] = idle[j]
        if busy[j] + idle[j] > cap:  # this stage's span alone loses (`idle_cap`)
            raise _CannotWin

    over = [False]  # some op broke the memory limit: the build is not a candidate

    def make_room(j: int, need: float) -> None:
        # Ws until `need` more fits under the limit (or none is owed).
        while mem[j] + need > limit[j] + _EPS and num_w[j] < num_b[j]:
            run_w(j)
        if mem[j] + need > limit[j] + _EPS:
            over[0] = True

    # The hot path: helpers are called only with work to do, put_* once per wave's stages.
    def put_fs(stages: Iterable[int]) -> None:  # the next F of each stage with Fs left
        for j in stages:
            x = num_f[j]
            if x == m:
                continue
            ready = f_end[j - 1][x] + t_comm[j - 1] if j > 0 else 0.0
            if mem[j] + m_b[j] > limit[j] + _EPS:
                make_room(j, m_b[j])  # the F would break the memory limit
            clock = free[j]
            if ready - clock > _EPS and x > 0 and num_w[j] < num_b[j]:
                fill_gap(j, ready)
                clock = free[j]
            if x == 0:
                first[j] = clock = clock if clock > ready else ready
            elif ready > clock:
                wait(j, ready)
                clock = ready
            free[j] = f_end[j][x] = clock + t_f[j]
            mem[j] += m_b[j]
            num_f[j] = x + 1
            codes[j].append(x)

    last = p - 1
    held_by_b = [w - b for w, b in zip(m_w, m_b, strict=True)]  # what a B adds

    def put_bs(stages: Iterable[int]) -> None:  # the next B (or BW) of each stage
        for j in stages:
            x = num_b[j]
            ready = b_end[j + 1][x] + t_comm[j] if j < last else f_end[j][x]
            if fused[j]:  # BW: frees m_b at its end, owes no W
                start = free[j] if free[j] > ready else ready
                if start > free[j]:
                    wait(j, start)
                free[j] = b_end[j][x] = start + t_b[j] + t_w[j]
                mem[j] -= m_b[j]
                num_b[j] = num_w[j] = x + 1
                codes[j].append(3 * m + x)
                continue
            if grows[j]:
                make_room(j, m_w[j] - m_b[j])  # m_w > m_b (DESIGN.md 6.1): B adds memory
            clock = free[j]
            if ready - clock > _EPS and num_w[j] < x:
                fill_gap(j, ready)
                clock = free[j]
            if ready > clock:
                wait(j, ready)
                clock = ready
            free[j] = b_end[j][x] = clock + t_b[j]
            mem[j] += held_by_b[j]
            num_b[j] = x + 1
            codes[j].append(m + x)

    def give_up() -> bool:
        ends = stage_floors(free, num_f, num_b, num_w, f_end, b_end, t_f, t_b, t_w, t_comm, fused)
        return cannot_win(ends, first, objective, incumbent)

    def warm_up() -> None:  # step 1: stage by stage, so each F's input is already timed
        if forwards is not None and forwards.covers(knobs.warmup):
            over[0] = forwards.place(knobs.warmup, f_end, free, first, idle, mem, num_f, codes)
            most_idle[0] = max(0.0, *idle)
            if any(b + i > cap for b, i in zip(busy, idle, strict=True)):
                raise _CannotWin
        else:
            for j in range(p):
                put_fs((j,) * knobs.warmup[j])

    # Step 2 (main step): wave i = one F per stage down the pipeline, then B of
    # microbatch i up the pipeline.
    b_first = [knobs.b_first_when_capped and j > 0 and knobs.warmup[j] == knobs.warmup[j - 1]
               for j in range(p)]
    stop = give_up if math.isfinite(incumbent) else None
    try:
        warm_up()
        done = _waves(p, m, put_fs, put_bs, stop) if not any(b_first) else \
            _waves_b_first(p, m, b_first, num_f, num_b, put_fs, put_bs, stop)
    except _CannotWin:
        done = False
    if not done:
        return _lost("stuck" if done is None else "cannot win", knobs, decisions)
    # Step 3 (cool-down): the Ws still owed.
    for j in range(p):
        while num_w[j] < m:
            run_w(j)
    if over[0]:
        return _lost("over the memory limit", knobs, decisions)
    cost = max(free[j] - first[j] for j in range(p))
    return Build(cost, max(free) - min(first), "zb-heuristic", codes=codes,
                 num_microbatches=m, decisions=decisions, knobs=knobs)


def _lost(why: str, knobs: Knobs, decisions: Decisions | None) -> Build:
    """A build that is no candidate, and why."""
    return Build(math.inf, math.inf, f"zb-heuristic ({why})", knobs=knobs, decisions=decisions)


class _CannotWin(Exception):
    """A stage of the build has idled so long that its span alone loses (`idle_cap`)."""


def _waves(p: int, m: int, put_fs: Callable[[Iterable[int]], None],
           put_bs: Callable[[Iterable[int]], None],
           give_up: Callable[[], bool] | None) -> bool:
    """The main step's 1F1B waves: wave i places one F per stage down the pipeline (each
    F's input is then already timed; stages with no F left skip it), then the B of
    microbatch i up the pipeline. False when `give_up` said so at a checkpoint."""
    down, up = range(p), range(p - 1, -1, -1)
    for i in range(m):
        if give_up is not None and is_checkpoint(i, m) and give_up():
            return False
        if i > 0:
            put_fs(down)
        put_bs(up)
    return True


def _waves_b_first(p: int, m: int, b_first: list[bool], num_f: list[int],
                   num_b: list[int], put_fs: Callable[[Iterable[int]], None],
                   put_bs: Callable[[Iterable[int]], None],
                   give_up: Callable[[], bool] | None) -> bool | None:
    """The main step where some stages take B before F in each wave; None if stuck,
    False when `give_up` said so at a checkpoint.

    A stage with as many warm-up Fs as the one before it (both capped by memory) takes
    its B before its F in each wave: with F first, its B would wait for its F, which
    waits for the previous stage's F of the same wave, which waits for that stage's
    previous B; every wave would then cost two Fs and two Bs. Ops are placed as their
    inputs are placed, stage by stage, until the wave is done.
    """
    for i in range(m):
        if give_up is not None and is_checkpoint(i, m) and give_up():
            return False
        todo = [["B"] if i == 0 else (["B", "F"] if b_first[j] else ["F", "B"])
                for j in range(p)]
        for j in range(p):
            if num_f[j] >= m and "F" in todo[j]:
                todo[j].remove("F")
        left = sum(map(len, todo))
        while left:
            placed = left
            for j in range(p):
                while todo[j]:
                    if todo[j][0] == "F":
                        if j > 0 and num_f[j - 1] <= num_f[j]:
                            break
                        put_fs((j,))
                    else:
                        x = num_b[j]
                        if (num_f[j] if j == p - 1 else num_b[j + 1]) <= x:
                            break
                        put_bs((j,))
                    todo[j].pop(0)
                    left -= 1
            if left == placed:  # no stage could move: this knob deadlocks here
                return None
    return True
