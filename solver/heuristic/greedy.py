"""A greedy list scheduler for any stage-to-rank map: the Zero Bubble heuristic's rules
(B first, F while memory allows, W into the bubbles) for several chunks per rank.

The single-chunk heuristic (`solver.heuristic`) builds 1F1B waves stage by stage; with
several stages per rank there are no waves to follow, so this one simulates time: each
rank, whenever it is free, takes the op the rules prefer among those whose inputs have
arrived, in the order of the cost model's list scheduling (DESIGN.md section 3). Its
orders are re-timed and validated by the simulator like every other order.

Rules, in order, for a free rank at time t:

1. a B whose gradient has arrived (the B chain is the critical path);
2. an F whose input has arrived, if the rank has room for its activation and still for
   one microbatch to pass through each of the rank's later stages (without that room an
   early stage could fill the memory and starve the later ones: a deadlock);
3. otherwise a W (oldest first) when the idle gap before the next arrival is at least
   ``fill`` of the W's time, or when an F waits for memory that the W frees;
4. otherwise wait for the next arrival.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ppsched.solver.generators import REGISTRY
from ppsched.solver.heuristic.chunked_timing import (
    CANNOT_WIN,
    DEADLOCK,
    OVER_THE_LIMIT,
    NotTimeable,
    RunningTiming,
    time_chunked_order,
)
from ppsched.solver.heuristic.early_stop import MARGIN
from ppsched.solver.heuristic.lookahead import CANDIDATES as LOOKAHEADS
from ppsched.solver.heuristic.lookahead import LARGE_CANDIDATES as LARGE_LOOKAHEADS
from ppsched.solver.heuristic.lookahead import Lookahead, later_stages_room, lookahead_timed
from ppsched.solver.heuristic.scale import searched_in_full
from ppsched.solver.heuristic.v_rounds import rounds_builds
from ppsched.solver.model.lazy_orders import LazyOrders
from ppsched.solver.model.ops import Op, Orders
from ppsched.solver.model.problem import Problem
from ppsched.solver.sim.simulator import peak_memory, simulate

_EPS = 1e-9
_new = tuple.__new__
_KINDS = ("F", "B", "W")


@dataclass(frozen=True)
class GreedyKnobs:
    """One point of the greedy scheduler's search space.

    Attributes:
        fill: a W starts in an idle gap when the gap is at least this fraction of it.
        deep_first: among ready Fs (and Bs arriving together), prefer the later stage
            (depth-first: a microbatch goes through the rank's chunks before a new one
            starts); False prefers the earlier stage (breadth-first).
        memory_cap: the memory the F rule may fill, as a fraction of each rank's limit
            (1.0: all of it; less holds fewer microbatches in flight, like 1F1B's warm-up).
    """

    fill: float = 1.0
    deep_first: bool = True
    memory_cap: float = 1.0


def greedy_schedule(problem: Problem, knobs: GreedyKnobs) -> Orders | None:
    """Per-rank orders by the rules above, or None if they reach a deadlock or break the
    memory limit.

    A deadlock can only come from the memory rule (every rank waiting for a B that needs
    room somewhere), and the limit only breaks where ``m_w > m_b`` (a B adds memory and
    the rules place a B whenever its gradient has arrived); the caller then tries other
    knobs or falls back to a named schedule.
    """
    built = greedy_timed(problem, knobs)
    return built[0] if not isinstance(built, str) else None


def greedy_timed(problem: Problem, knobs: GreedyKnobs, objective: str = "cost",
                 incumbent: float = math.inf) -> tuple[Orders, float] | str:
    """`greedy_schedule`'s orders and their `objective` as the simulator times them, or
    why there are none: `DEADLOCK`, `OVER_THE_LIMIT` (a B adds memory where
    ``m_w > m_b``) or `CANNOT_WIN` once they provably cannot end `early_stop.MARGIN`
    below `incumbent` (issue 11: against the ZB-V order at p=32, m=256 a losing build is
    known within its warm-up, a twentieth of its ops).
    """
    return _build(problem, knobs, objective, incumbent, [])


def greedy_timed_alike(problem: Problem, knobs: GreedyKnobs, objective: str = "cost",
                       incumbent: float = math.inf, fills: Sequence[float] = (),
                       ) -> tuple[tuple[Orders, float] | str, tuple[float, ...]]:
    """`greedy_timed`, and the values of `fills` with which the build (its other knobs
    the same) makes every decision it made: raced against the same incumbent, they end
    the same way.

    The fill decides only where a W could start in a gap shorter than the W; a losing
    build mostly stops before the first such gap, so its fill siblings need no build
    (issue 11: at p=32, m=256, 1p, 8 of the V search's 18 builds).
    """
    alike = list(fills)
    built = _build(problem, knobs, objective, incumbent, alike)
    return built, tuple(alike)


class _State:
    """A greedy build's lists: per stage its ops' ends by the build's clock (nan: not
    placed) and how many of each kind are placed; per rank its memory, its clock, its
    ops left and its order; the undecided ranks by (clock, rank): each rank is in
    `ready` or `stalled` (waiting for an op of another rank to be placed) until its ops
    are all placed."""

    def __init__(self, problem: Problem) -> None:
        p, m, num_stages = problem.num_ranks, problem.num_microbatches, problem.num_stages
        self.rank_stages = [sorted(stages) for stages in problem.rank_to_stages]
        self.end_f = [[math.nan] * m for _ in range(num_stages)]
        self.end_b = [[math.nan] * m for _ in range(num_stages)]
        self.next_f, self.next_b = [0] * num_stages, [0] * num_stages
        self.next_w = [0] * num_stages
        self.memory = [0.0] * p
        self.clock = [0.0] * p  # when each rank is next free to decide
        self.remaining = [3 * m * len(stages) for stages in self.rank_stages]
        self.orders: Orders = [[] for _ in range(p)]
        self.ready = [(0.0, q) for q in range(p) if self.remaining[q]]
        self.stalled = [False] * p


def _build(problem: Problem, knobs: GreedyKnobs, objective: str, incumbent: float,
           alike: list[float]) -> tuple[Orders, float] | str:
    """`greedy_timed`; keeps in `alike` (when it has more than one) the fills that
    decide as `knobs.fill` at every gap."""
    m, num_stages = problem.num_microbatches, problem.num_stages
    m_b = problem.m_b
    # The memory an F of each stage may fill: a rank's last stage, up to the hard limit;
    # an earlier one leaves room for one activation of each of the rank's later stages,
    # under the (possibly capped) limit of the F rule.
    reserve = later_stages_room(problem)
    limit = [x * knobs.memory_cap if math.isfinite(x) else x for x in problem.memory_limit]
    hard_limit, rank_of = problem.memory_limit, problem.stage_to_rank
    room = [limit[rank_of[s]] - reserve[s] if reserve[s] > 0 else hard_limit[rank_of[s]]
            for s in range(num_stages)]
    # s -> s+1; 0 after the last stage (its B's gradient is its own F, on its rank)
    comm_down = [problem.comm(s, s + 1) for s in range(num_stages - 1)] + [0.0]
    g = _State(problem)
    end_f, end_b, next_f, next_b = g.end_f, g.end_b, g.next_f, g.next_b
    memory, remaining, ready, rank_stages = g.memory, g.remaining, g.ready, g.rank_stages
    last = num_stages - 1
    timing = RunningTiming(problem, objective, incumbent)
    place = _placer(problem, g, timing.place)
    w_or_wait = _w_or_wait(problem, knobs, g, alike)

    # Per rank, its stages in the order the B and F rules look at them.
    depth_order = [stages[::-1] if knobs.deep_first else stages for stages in rank_stages]
    while ready:
        # The undecided rank with the earliest clock (ties: the lowest rank) decides
        # next; every op another rank has yet to place ends later, so what has arrived by
        # then is already known.
        now, r = heapq.heappop(ready)
        stages, by_depth = rank_stages[r], depth_order[r]

        # Rule 1: a B whose gradient has arrived.
        best_b, best_b_at = -1, math.inf
        for s in by_depth:
            j = next_b[s]
            if j < next_f[s]:
                # Its gradient: the F here on the last stage, else the next stage's B.
                # (Inlined, as the F's arrival below: a function call per stage and op
                # was a sixth of a build.)
                done = end_f[s][j] if s == last else end_b[s + 1][j]
                at = done + comm_down[s] if done == done else math.inf
                if at < best_b_at - _EPS:
                    best_b, best_b_at = s, at
        if best_b >= 0 and best_b_at <= now + _EPS:
            k, chosen = 1, best_b
        else:
            # Rule 2: an F whose input has arrived and that has room.
            best_f, best_f_at, blocked = -1, math.inf, False
            for s in by_depth:
                j = next_f[s]
                if j >= m:
                    continue
                if s:  # its input: the previous stage's F
                    done = end_f[s - 1][j]
                    at = done + comm_down[s - 1] if done == done else math.inf
                else:
                    at = 0.0
                if memory[r] + m_b[s] > room[s] + _EPS:
                    if at <= now + _EPS:
                        blocked = True
                    continue
                if at < best_f_at - _EPS:
                    best_f, best_f_at = s, at
            if best_f >= 0 and best_f_at <= now + _EPS:
                k, chosen = 0, best_f
            else:
                # Rules 3 and 4: a W, or wait.
                k, chosen = 2, w_or_wait(r, stages, now, min(best_b_at, best_f_at), blocked)
                if chosen < 0:
                    continue
        failed = place(r, k, chosen, now)
        if failed is not None:
            return failed  # OVER_THE_LIMIT or CANNOT_WIN
    # No rank left undecided: done, or every rank waits on another.
    return DEADLOCK if any(remaining) else (g.orders, timing.value(objective))


def _placer(problem: Problem, g: _State, step: Callable[[int, int], str | None],
            ) -> Callable[[int, int, int, float], str | None]:
    """The step that places an op: the build's state, then the kernel's `step`."""
    m, num_stages, rank_of = problem.num_microbatches, problem.num_stages, \
        problem.stage_to_rank
    m_b, m_w = problem.m_b, problem.m_w
    time_of = (problem.t_f, problem.t_b, problem.t_w)  # by kind: F, B, W
    delta = (m_b, [w - b for w, b in zip(m_w, m_b, strict=True)], [-w for w in m_w])
    counts, ends = (g.next_f, g.next_b, g.next_w), (g.end_f, g.end_b)
    memory, orders, clock, remaining = g.memory, g.orders, g.clock, g.remaining
    stalled, ready = g.stalled, g.ready

    def place(r: int, k: int, stage: int, now: float) -> str | None:
        """Place the next op of kind `k` (F, B, W) of `stage` on rank `r` at `now` by the
        build's clock; None, or why the orders fail (they break the limit, or cannot
        win)."""
        count = counts[k]
        microbatch = count[stage]
        count[stage] = microbatch + 1
        end = now + time_of[k][stage]
        if k < 2:
            ends[k][stage][microbatch] = end
        memory[r] += delta[k][stage]
        kind = _KINDS[k]
        # (tuple.__new__: half the named tuple's own constructor, at 49k ops a build)
        orders[r].append(_new(Op, (kind, stage, microbatch)))
        clock[r] = end
        remaining[r] -= 1
        # A new F is the input of the next stage's F, a new B of the previous stage's B:
        # the rank of that stage looks again if it was stalled (nothing else changes what
        # a stalled rank sees; at p=32 waking every rank cost 7 idle looks per op).
        s = stage + 1 if kind == "F" else stage - 1 if kind == "B" else -1
        if 0 <= s < num_stages and stalled[rank_of[s]]:
            q = rank_of[s]
            stalled[q] = False
            heapq.heappush(ready, (clock[q], q))
        if remaining[r]:
            heapq.heappush(ready, (end, r))
        return step(r, (k * num_stages + stage) * m + microbatch)  # the kernel times it

    return place



def _w_or_wait(problem: Problem, knobs: GreedyKnobs, g: _State, alike: list[float],
               ) -> Callable[[int, list[int], float, float, bool], int]:
    """Rules 3 and 4 for rank `r` at `now`: the stage of the oldest W owed if it goes
    into the gap before the next arrival `next_at` (or frees memory for a `blocked`
    F); else -1, and the rank waits for the next arrival (or, if none is known yet, for
    other ranks). Narrows `alike` to the fills that decide alike."""
    t_w, fill = problem.t_w, knobs.fill
    next_w, next_b, end_b, clock, ready, stalled = g.next_w, g.next_b, g.end_b, g.clock, \
        g.ready, g.stalled

    def w_or_wait(r: int, stages: list[int], now: float, next_at: float,
                  blocked: bool) -> int:
        w_stage = -1
        for s in stages:
            if next_w[s] < next_b[s] and (w_stage < 0 or end_b[s][next_w[s]]
                                          < end_b[w_stage][next_w[w_stage]]):
                w_stage = s
        gap = next_at - now
        take_w = w_stage >= 0 and (blocked or gap >= fill * t_w[w_stage] - _EPS)
        if w_stage >= 0 and not blocked and len(alike) > 1:
            alike[:] = [f for f in alike if (gap >= f * t_w[w_stage] - _EPS) == take_w]
        if take_w:
            return w_stage
        if next_at < math.inf:
            clock[r] = next_at
            heapq.heappush(ready, (next_at, r))
        else:
            stalled[r] = True
        return -1

    return w_or_wait


FILL_CHOICES = (1.0, 0.5, 0.0)
RACED_FIRST = "zb-v"
ROUNDS_PREFERENCE = 300  # after the lookahead candidates (200+), before one at a time
MEMORY_CAPS = (1.0, 0.875, 0.75)


def greedy_search(problem: Problem, objective: str = "cost", lookahead: bool = True,
                  ) -> tuple[Orders, str, float]:
    """`raced_greedy_search` with nothing to race: the search's own answer."""
    found = raced_greedy_search(problem, objective, lookahead)
    assert found is not None  # one_at_a_time always fits a valid profile
    return found


def raced_greedy_search(problem: Problem, objective: str = "cost", lookahead: bool = True,
                        below: float = math.inf) -> tuple[Orders, str, float] | None:
    """The best order among the greedy's knob settings and the named schedules for this
    placement that fit the memory limit, by `objective` (``cost`` or ``makespan``).

    Returns the orders, where they came from (``greedy``, a schedule's name, a
    lookahead candidate's or a rounds build's) and their objective as the simulator
    timed them. One candidate always fits: microbatches one after another through the
    whole pipeline (`one_at_a_time`) holds only what any schedule must. With `lookahead`
    (and in V placement where ZB-V does not fit), V-Half's and V-Min's orders
    list-scheduled with a lookahead window are candidates too (`solver.lookahead`). In
    V placement the builds in rounds of the authors' ZB-V scheduler are (`v_rounds`).

    The named schedules are timed first, each generated only as far as its race reads it
    (`solver.lazy_orders`), then the rounds builds: the best of them is the incumbent
    every greedy build races against, and a losing build stops within its warm-up (issue
    11: at p=32, m=256 the ZB-V order wins at 1p, and the search took 5 s); a build that
    stopped before any decision its fill could change stands for its fill siblings. The
    answer is the one the candidates give in the order of preference below (the
    greedy's, then the named schedules', the lookahead ones, the rounds builds, then one
    at a time; a later one only when better by `_EPS`): a
    candidate stops only once it is worse than the best so far by more than that, so
    the answer is the one the whole search would give.

    `below` (`first_best`: an earlier layout's answer), for a large order only
    (`solver.heuristic.scale`): every candidate but ZB-V also stops once it provably
    cannot end below it, so one that ends below it ends as in the search alone, and the
    answer is the search's own where that is below `below` (the loop2 search of p=128,
    m=1024 at 0.5p took 23% of the time against V's answer, 0.61 s of 2.66 s). There no
    choice of the search depends on which candidates finished, except the lookahead
    candidates' on ZB-V's, which is therefore timed whole. A search in full tries the memory caps of
    its best finished greedy build, which a race could hide: it ignores `below`. None:
    no candidate ended below `below`.
    """
    if searched_in_full(problem):
        below = math.inf
    search = _VSearch(problem, objective, below)
    names = search.named()
    if problem.placement == "v":
        search.rounds()
    search.greedy_builds()
    if lookahead and RACED_FIRST in names \
            and not any(source == RACED_FIRST for *_, source in search.kept):
        search.lookaheads()
    # Microbatch after microbatch: rank 0 runs every stage's ops of one microbatch in
    # turn, m times, so it cannot beat a schedule already below that.
    floor = problem.num_microbatches * sum(map(sum, (problem.t_f, problem.t_b, problem.t_w)))
    if not search.kept or search.best_value() > floor + _EPS:
        search.keep(1000, one_at_a_time(problem), "one-at-a-time")
    if not search.kept:
        return None  # one_at_a_time fits a valid profile: it lost the race to `below`
    best: tuple[float, Orders, str] | None = None
    for _, value, orders, source in sorted(search.kept, key=lambda x: x[0]):
        if best is None or value < best[0] - _EPS:
            best = (value, orders, source)
    assert best is not None
    value, orders, source = best
    return orders, source, value


class _VSearch:
    """The candidates of `greedy_search` kept so far, and how each new one is raced."""

    def __init__(self, problem: Problem, objective: str, below: float = math.inf) -> None:
        self.problem, self.objective = problem, objective
        # A build stops once its floor reaches its incumbent less MARGIN / 2: one that
        # ends below `below` never does against this.
        self.cap = below + MARGIN / 2
        self.kept: list[tuple[int, float, Orders, str]] = []  # (preference, value, ...)
        # Builds that ended before their end (stopped, over the limit, deadlocked), by
        # their other knobs: the fills that decide alike, the incumbent raced, the end.
        self.ended: dict[tuple[bool, float], list[tuple[tuple[float, ...], float, str]]] = {}

    def best_value(self) -> float:
        return min((value for _, value, _, _ in self.kept), default=math.inf)

    def incumbent(self, preference: int, capped: bool = True) -> float:
        """What a candidate races: it stops once it would lose by more than a tie to the
        best so far (a tie may still be the answer, when it is preferred), and once it
        cannot end below a kept candidate preferred to it: the answer takes a later
        candidate only when it is better by `_EPS` than the best before it, which is
        within `_EPS` of every candidate before it, so a tie to one of them is never the
        answer (at p=32, m=256, 2p: the second of two tied greedy builds, a fifth of the
        search, ran to its end). A tie here is within a quarter of the margin: the race's
        floor sums a rank's op times in another order than its end, and that rounding
        (about 1e-10 there) hid the tie until the last op. `capped`: and once it cannot
        end below the search's `below`."""
        preferred = min((value for rank, value, _, _ in self.kept if rank < preference),
                        default=math.inf)
        own = min(self.best_value() + 3 * _EPS, preferred + MARGIN / 4)
        return min(own, self.cap) if capped else own

    def keep(self, preference: int, orders: Orders | LazyOrders, source: str,
             capped: bool = True) -> None:
        value = _value(self.problem, orders, self.objective,
                       self.incumbent(preference, capped))
        if value is not None:
            complete = orders.complete() if isinstance(orders, LazyOrders) else orders
            self.kept.append((preference, value, complete, source))

    def build(self, knobs: GreedyKnobs, preference: int) -> tuple[Orders, float] | str:
        race = self.incumbent(preference)
        key = (knobs.deep_first, knobs.memory_cap)
        for fills, raced, how in self.ended.get(key, ()):
            if knobs.fill in fills and raced == race:
                return how  # the same decisions against the same incumbent: the same end
        built, fills = _greedy(self.problem, knobs, self.objective, race)
        if isinstance(built, str):
            self.ended.setdefault(key, []).append((fills, race, built))
        return built

    def named(self) -> list[str]:
        """The named schedules of the placement, timed first; their names."""
        problem = self.problem
        names = [name for name, generator in sorted(REGISTRY.items())
                 if generator.supports(problem) and problem.num_chunks > 1]
        # ZB-V first: where it fits it is mostly the best named schedule, and the others
        # then stop early against it (the preference stays by name).
        raced = sorted(enumerate(names, start=100), key=lambda x: x[1] != RACED_FIRST)
        for preference, name in raced:
            try:
                # Generated as far as the race reads it: a loser stops within its warm-up.
                lazy = REGISTRY[name].lazy(problem)
            except ValueError:
                continue  # a shape the schedule refuses (e.g. interleaved's microbatches)
            self.keep(preference, lazy, name, capped=name != RACED_FIRST)
        return names

    def greedy_builds(self) -> None:
        """The fill and priority rules first, with all the memory; then, for the best of
        them, holding fewer microbatches in flight (which can shorten the cool-down)."""
        greedy: dict[GreedyKnobs, float] = {}
        lost: list[GreedyKnobs] = []  # the builds that stopped as they could not win
        preferred = [GreedyKnobs(fill, deep_first) for deep_first in (True, False)
                     for fill in FILL_CHOICES]
        # Raced the least fill first: on the paper profiles it is mostly the best of the
        # six, and the others then stop earlier against it (the preference stays).
        raced = sorted(preferred, key=lambda k: k.fill)
        full = searched_in_full(self.problem)
        # A large order (`solver.heuristic.scale`) gets the first build only, no caps.
        for knobs in raced if full else raced[:1]:
            built = self.build(knobs, 1 + preferred.index(knobs))
            if built == CANNOT_WIN:
                lost.append(knobs)
            elif not isinstance(built, str):
                greedy[knobs] = built[1]
                self.kept.append((1 + preferred.index(knobs), built[1], built[0], "greedy"))
        lost.sort(key=preferred.index)
        greedy = {k: greedy[k] for k in preferred if k in greedy}
        if full and any(map(math.isfinite, self.problem.memory_limit)):
            self.capped_builds(greedy, lost)

    def capped_builds(self, greedy: dict[GreedyKnobs, float], lost: list[GreedyKnobs],
                      ) -> None:
        """For the best valid build of the six (the first, unless a later one is better
        by `_EPS`), the memory caps. A stopped one was worse than a kept candidate, so it
        could not beat a finished one; when every valid build stopped, their values are
        unknown and each one's caps are tried (a losing capped build stops as early).
        None valid: no caps, as the knobs to cap are not known."""
        best_knobs: GreedyKnobs | None = None
        for knobs, value in greedy.items():
            if best_knobs is None or value < greedy[best_knobs] - _EPS:
                best_knobs = knobs
        capped = [dataclasses.replace(knobs, memory_cap=cap)
                  for knobs in ([best_knobs] if best_knobs is not None else lost)
                  for cap in MEMORY_CAPS[1:]]
        for knobs in sorted(capped, key=lambda k: k.fill):  # raced as the six were
            built = self.build(knobs, 10 + capped.index(knobs))
            if not isinstance(built, str):
                self.kept.append((10 + capped.index(knobs), built[1], built[0], "greedy"))

    def rounds(self) -> None:
        """The V builds in rounds (`solver.heuristic.v_rounds`: the rule of the Zero
        Bubble authors' ZB-V scheduler), raced after the named schedules and before the
        greedy's builds: where they win (1p-2p on the paper profiles) the greedy's builds
        stop earlier against them. Preferred after every other candidate, so they change
        an answer only where they are better. Their timing is the kernel's (any
        microbatches), so a build's value is the simulator's."""
        def race(i: int) -> float:
            return self.incumbent(ROUNDS_PREFERENCE + i)

        for i, (knobs, built) in enumerate(rounds_builds(self.problem, self.objective, race)):
            if not isinstance(built, str):
                self.kept.append((ROUNDS_PREFERENCE + i, built[1], built[0], knobs.name))

    def lookaheads(self) -> None:
        """Below ZB-V's memory: the named V orders, list-scheduled with a lookahead
        window under the limit (`solver.lookahead`), raced as the builds were."""
        for preference, candidate in enumerate(LOOKAHEADS, start=200):
            if candidate not in LARGE_LOOKAHEADS and not searched_in_full(self.problem):
                continue  # a large order (`solver.heuristic.scale`): the one that won there
            built = _lookahead(self.problem, candidate, self.objective,
                               self.incumbent(preference))
            if not isinstance(built, str):
                self.kept.append((preference, built[1], built[0], candidate.name))


def _greedy(problem: Problem, knobs: GreedyKnobs, objective: str, incumbent: float,
            ) -> tuple[tuple[Orders, float] | str, tuple[float, ...]]:
    """One greedy build and its value (or why it has none, see `greedy_timed`), raced
    against `incumbent` where the build's own timing is the simulator's (alike
    microbatches); and the `FILL_CHOICES` that build alike (`greedy_timed_alike`)."""
    if problem.uniform_microbatches:
        return greedy_timed_alike(problem, knobs, objective, incumbent, FILL_CHOICES)
    built, fills = greedy_timed_alike(problem, knobs, fills=FILL_CHOICES)
    if isinstance(built, str):
        return built, fills
    value = _value(problem, built[0], objective)
    return ((built[0], value) if value is not None else OVER_THE_LIMIT), fills


def _lookahead(problem: Problem, candidate: Lookahead, objective: str, incumbent: float,
               ) -> tuple[Orders, float] | str:
    """One lookahead candidate and its value (or why it has none), raced against
    `incumbent` where its own timing is the simulator's (alike microbatches)."""
    try:
        if problem.uniform_microbatches:
            return lookahead_timed(problem, candidate, objective, incumbent)
        built = lookahead_timed(problem, candidate)
    except ValueError:
        return DEADLOCK  # a shape the base schedule refuses: no candidate
    if isinstance(built, str):
        return built
    value = _value(problem, built[0], objective)
    return (built[0], value) if value is not None else OVER_THE_LIMIT


def _value(problem: Problem, orders: Orders | LazyOrders, objective: str,
           incumbent: float = math.inf) -> float | None:
    """The objective of a valid order within the limit, or None (for an order timed by
    `time_chunked_order`, also when it cannot win against `incumbent`)."""
    try:
        timed = time_chunked_order(problem, orders, objective, incumbent)
    except NotTimeable:
        pass  # the simulator times it
    else:
        if timed is None:
            return None
        return timed[1] if objective == "makespan" else timed[0]
    if isinstance(orders, LazyOrders):
        orders = orders.complete()
    if not _fits(problem, orders):
        return None  # a named schedule over the limit: not worth timing
    sim = simulate(problem, orders)
    if not sim.ok or sim.metrics is None:
        return None
    return sim.metrics.makespan if objective == "makespan" else sim.metrics.cost


def _fits(problem: Problem, orders: Orders) -> bool:
    peaks = peak_memory(problem, orders)
    return all(x <= limit + _EPS for x, limit in zip(peaks, problem.memory_limit, strict=True))


def one_at_a_time(problem: Problem) -> Orders:
    """Each microbatch through every stage and back before the next starts.

    Holds one microbatch's activations per rank: the least any schedule needs, so it fits
    every limit a valid profile allows. The slowest order there is; the fallback only.
    """
    orders: Orders = [[] for _ in range(problem.num_ranks)]
    rank_of = problem.stage_to_rank
    for j in range(problem.num_microbatches):
        for s in range(problem.num_stages):
            orders[rank_of[s]].append(Op("F", s, j))
        for s in reversed(range(problem.num_stages)):
            orders[rank_of[s]].append(Op("BW", s, j))
    return orders
