"""The bound over every layout a solve considered (DESIGN.md 6.6).

A solve that may cut the model several ways (`solving.layouts`) answers with the best
schedule of one layout, so the bound it prints must hold over every schedule of every
layout it considered: issue 27 found "gap 0.00%" printed at 1309.5 on gpt1.5b-p8-m24,
the single-chunk optimum, while the V layout gives 1188.4 at the same memory. Each
layout's bound holds over that layout's schedules, so the least of them holds over all;
each is also reported on its own (`solver.layout_bounds`), and `solver.bound_scope`
names the layouts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ppsched.solver.exact.frame import SCOPE_ALL
from ppsched.solver.model.bounds import clamped_to, general_lower_bound
from ppsched.solver.model.profile import Profile
from ppsched.solver.model.schedule import Schedule
from ppsched.solver.solving.layouts import layout_name

# Two bounds closer than this (relative) are the same figure summed in another order.
_TOLERANCE = 1e-9


def layout_of(profile: Profile) -> str:
    """The short name of the layout `profile` is cut in (``1``, ``v``, ``loopN``)."""
    return layout_name((profile.num_chunks, profile.placement))


@dataclass
class LayoutBounds:
    """Each considered layout's best bound over all of its schedules, by layout name, in
    the order the solve considered them."""

    bounds: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, candidates: list[Profile]) -> LayoutBounds:
        """The simulator's general bound of each candidate profile."""
        return cls({layout_of(c): general_lower_bound(c.problem) for c in candidates})

    def raise_to(self, layout: str, bound: float) -> None:
        """Record a bound proven over every schedule of `layout` (a memory relaxation)."""
        self.bounds[layout] = max(self.bounds[layout], bound)

    def overall(self) -> float:
        """The bound over every schedule of every considered layout."""
        return min(self.bounds.values())

    def others(self, layout: str) -> dict[str, float]:
        return {name: b for name, b in self.bounds.items() if name != layout}

    def names(self) -> str:
        return ", ".join(self.bounds)

    def scope(self) -> str:
        """The scope of `overall`, naming the layouts."""
        kind = "layout" if len(self.bounds) == 1 else "layouts"
        return f"{SCOPE_ALL} of {kind} {self.names()}"


def apply_layout_bounds(schedule: Schedule, layouts: LayoutBounds,
                        narrow: tuple[float, str] | None = None) -> None:
    """Set the schedule's printed bounds from `layouts`: `metrics.lower_bound` over every
    schedule of every considered layout, and `solver.bound` the same or, with `narrow`
    (an exact model's bound on the answer's layout and the order family it holds over),
    the least of that and the other layouts' bounds, its scope named. Status ``optimal``
    stays only where no considered layout can beat the answer within that scope.
    """
    metrics, info = schedule.metrics, schedule.solver
    assert metrics is not None and info is not None
    winner = layout_of(schedule.profile)
    value = info.objective
    general = clamped_to(layouts.overall(), metrics.cost)
    metrics.lower_bound = general
    info.layout = winner
    info.layouts = list(layouts.bounds)
    info.layout_bounds = dict(layouts.bounds)
    bound, scope = general, layouts.scope()
    if narrow is not None:
        proven, family = narrow
        own = max(layouts.bounds[winner], min(proven, value))
        others = layouts.others(winner)
        candidate = min([own, *others.values()])
        if candidate > general + _TOLERANCE * max(1.0, general):
            bound = candidate
            scope = f"{family}, layout {winner}"
            if others:
                scope += f"; {SCOPE_ALL} of " + ("layout " if len(others) == 1
                                                  else "layouts ") + ", ".join(others)
    info.bound = clamped_to(bound, value)
    info.gap = (value - info.bound) / value if value > 0 else 0.0
    info.bound_scope = scope
    if info.status == "optimal" and info.bound < value - _TOLERANCE * max(1.0, value):
        info.status = "feasible"  # proven within its layout; another may still beat it
