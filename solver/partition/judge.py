"""The judge of a cut: the solver's heuristic on the cut profile (milliseconds), timed by
the simulator like every schedule ppsched emits."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.layers import LayerProfile, cut_profile
from ppsched.solver.model.schedule import Schedule
from ppsched.solver.partition.cuts import Cut
from ppsched.solver.solving import HEURISTIC, solve

# The step time a user waits for is the makespan (the optimizer step synchronises the
# ranks); the heuristic minimises what it is judged by.
OBJECTIVE = "makespan"


@dataclass(frozen=True)
class Judged:
    """One cut and what the heuristic made of it."""

    cut: Cut
    schedule: Schedule | None
    """None: the cut does not fit the memory limit (`refused` says why)."""
    refused: str | None = None

    @property
    def step_time(self) -> float:
        """The heuristic's makespan; infinite for a cut that does not fit."""
        if self.schedule is None or self.schedule.metrics is None:
            return math.inf
        return self.schedule.metrics.makespan

    @property
    def peak_memory(self) -> float:
        """The largest rank's peak activation memory; infinite for a cut that does not fit."""
        if self.schedule is None or self.schedule.metrics is None:
            return math.inf
        return max(self.schedule.metrics.peak_memory)


def judge(layers: LayerProfile, cut: Cut) -> Judged:
    """Solve `layers` cut by `cut` with the heuristic, one stage per rank."""
    try:
        profile = cut_profile(layers, cut)
    except ProfileError as exc:
        return Judged(cut, None, str(exc))
    return Judged(cut, solve(profile, HEURISTIC, OBJECTIVE, layouts=((1, None),)))
