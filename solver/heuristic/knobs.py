"""The knobs of the Zero Bubble heuristic's search (`heuristic.search`) and what a build
of one point of it gives (`heuristic.build`): `Knobs`, `Build`, and the W fill rule that
`Decisions` replays to tell knobs that would build the same order op for op.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

from ppsched.solver.model.ops import Kind, Op, Orders

_new_tuple = tuple.__new__

FILL_CHOICES = (0.2, 0.5, 1.0)
COOLDOWN_GREEDY, COOLDOWN_HEAD_START, COOLDOWN_B_FIRST = range(3)
FillRule = tuple[float, int, bool]
"""The knobs the W fill's decisions read: (fill, cooldown, balance)."""
Decision = tuple[int, bool, bool, float, float, float]
"""What a W fill decision sees (the arguments of `stops` after the rule)."""


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
            # `stops` before the last F, inlined (the threshold is the fill): these
            # decisions are the most, and this runs for every knob the search tries.
            if balance and fill > 0.0:
                if any((seen[3] <= seen[5]) != stop for seen, stop in self.main):
                    return False
            elif any((seen[3] < fill * seen[4]) != stop for seen, stop in self.main):
                return False
        return all(stops(rule, *seen) == stop for seen, stop in self.cooldown)


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

def threshold(fill: float, cooldown: int, stage: int, past_last_f: bool,
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


def stops(rule: FillRule, stage: int, past_last_f: bool, backlog_fits: bool, gap: float,
          t_w: float, idle_slack: float) -> bool:
    """Whether the fill leaves a gap idle rather than overrun it with a W: with balance,
    when idling keeps this stage no more idle than the most idle one (`idle_slack`: how
    far it is behind that one)."""
    fill, cooldown, balance = rule
    least = threshold(fill, cooldown, stage, past_last_f, backlog_fits)
    if balance and least > 0.0:
        return gap <= idle_slack
    return gap < least * t_w
