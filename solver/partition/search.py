"""The partition search (DESIGN.md 6.7): the best contiguous cut of a per-layer profile
into one stage per rank, with the heuristic as the judge and a bound over every cut.

1. `CutCosts.least`: the least cut bound over every memory-feasible cut (a dynamic
   program); it bounds the makespan of every schedule of every cut.
2. The cuts in order of their bound, up to a budget (a count by threshold picks how many),
   are judged by the heuristic; the search stops at the first cut whose bound is no less
   than the best step time judged, since no later cut can beat it.
3. The baselines (even, torchtitan, Megatron's best) are judged too, and the best of all
   wins: the result is never worse than any of them.

When the search stops by the bound, or every cut below the best step time was judged, the
chosen cut is the best under the judge over every cut (`proven`), the answer an exhaustive
search over all cuts would give.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.layers import LayerProfile
from ppsched.solver.partition.baselines import even_cut, megatron_cuts, torchtitan_cut
from ppsched.solver.partition.cuts import Cut, CutCosts, all_cuts
from ppsched.solver.partition.judge import Judged, judge

_EPS = 1e-9  # relative: step times are sums of floats

BOUND_SCOPE = ("every contiguous cut of the layers into one stage per rank, and every "
               "schedule of it under the DESIGN.md cost model (makespan)")


@dataclass(frozen=True)
class Compared:
    """A cut a user could have had, by name."""

    label: str
    judged: Judged | None
    """None: the rule gives no cut for this profile (too few layers)."""
    note: str = ""


@dataclass
class Partition:
    """The search's answer."""

    best: Judged
    lower_bound: float
    """A bound on the makespan over `BOUND_SCOPE`."""
    proven: bool
    """Whether `best` is the best cut under the judge over every cut."""
    judged: int
    """How many distinct cuts the heuristic judged."""
    compared: list[Compared] = field(default_factory=list)
    bound_scope: str = BOUND_SCOPE


class _Judge:
    """`judge`, once per cut."""

    def __init__(self, layers: LayerProfile) -> None:
        self.layers = layers
        self.seen: dict[Cut, Judged] = {}

    def __call__(self, cut: Cut) -> Judged:
        if cut not in self.seen:
            self.seen[cut] = judge(self.layers, cut)
        return self.seen[cut]


def partition(layers: LayerProfile, budget: int = 256) -> Partition:
    """The best cut of `layers` found by judging at most `budget` cuts by bound (plus the
    baselines).

    Raises:
        ProfileError: a profile whose memory limit no cut fits (naming the limit).
    """
    costs = CutCosts.of(layers)
    least, least_cut = costs.least()
    if least_cut is None:
        raise ProfileError("memory_limit", layers.memory_limit, f"a limit some cut of the "
                           f"{len(layers.layers)} layers into {layers.num_ranks} stages fits "
                           "(each rank holds its layers' m_b for one microbatch), or null")
    run = _Judge(layers)
    compared = _baselines(layers, run)
    # The best judged so far bounds the search: the baselines and the least-bound cut.
    best = min([run(least_cut), *(c.judged for c in compared if c.judged is not None)],
               key=lambda j: j.step_time)
    threshold, above = costs.threshold_for(max(1, budget), least)
    candidates = sorted(costs.under(threshold, max(1, budget)), key=costs.bound)
    for cut in candidates:
        if costs.bound(cut) >= best.step_time - _EPS * max(1.0, best.step_time):
            proven = True  # this cut and every later one: bound >= the best step time
            break
        verdict = run(cut)
        if verdict.step_time < best.step_time:
            best = verdict
    else:
        # Every cut under the threshold judged (unless more tie at the least bound than
        # the budget lists); the others have a bound >= `above`.
        complete = costs.count_under(threshold) <= len(candidates)
        proven = complete and above >= best.step_time - _EPS * max(1.0, best.step_time)
    compared.insert(0, Compared("ppsched", best))
    return Partition(best, least, proven, len(run.seen), compared)


def _baselines(layers: LayerProfile, run: _Judge) -> list[Compared]:
    out = []
    even = even_cut(layers)
    out.append(Compared("even split", run(even) if even else None))
    titan = torchtitan_cut(layers)
    out.append(Compared("torchtitan", run(titan) if titan else None))
    megatron: tuple[float, int, int, Judged] | None = None
    for a, b, cut in megatron_cuts(layers):
        verdict = run(cut)
        if megatron is None or verdict.step_time < megatron[0]:
            megatron = (verdict.step_time, a, b, verdict)
    out.append(Compared("Megatron first/last", megatron[3] if megatron else None,
                        f"A={megatron[1]} B={megatron[2]}" if megatron else ""))
    return out


def best_by_exhaustion(layers: LayerProfile) -> float:
    """The best step time over every cut, each judged: the reference for tests."""
    return min((judge(layers, cut).step_time
                for cut in all_cuts(len(layers.layers), layers.num_ranks)), default=math.inf)
