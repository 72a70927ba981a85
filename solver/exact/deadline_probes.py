"""Deadline probes: a rising search over caps on the objective, for a bound from below.

A probe asks an exact model "is there a schedule whose objective is at most U?" (U an
integer number of ticks). A refuted U proves every schedule of the model's scope costs
at least U + 1 tick; an answer found caps the optimum from above. The search rises from a
known lower bound in small steps while probes are refuted, and bisects between the two
sides once a schedule is found.

Why rise from below rather than descend from the heuristic (issue 11,
`gpt1.5b-p8-m24 --memory-limit 6`, the order-literal model of `solver.cpsat_tight`, one
worker on one core): capped at U the model's windows (every op of a rank within U of its
first start) and its memory rule propagate so strongly that presolve alone refutes
U = 1527.2 in 1.1 s and U = 1515 in 0.4 s, and capped at 1560 it finds and proves the
optimum 1527.3 in 6.5 s; minimising from the heuristic's 1895.4 instead, it is at 1683.6
after 20 s. Refuting is cheap and searching close above the optimum is fast, so small
steps up from the bound lead to the optimum with little search. This module holds only
the search over caps; the model behind a probe is the caller's (`solver.cpsat`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

# Each rising step raises the cap by this fraction of the bound: a first cap that is not
# refuted then lies at most this far above the optimum, where the search is fast (see
# above: 1% above the optimum 1527.3 was found and proven in 5 s on one core).
STEP_FRACTION = 0.01
# Steps up from the last refuted cap for the long probe (see `rise_to_optimum`). Measured
# with 10 s of deterministic time (one worker, seed 0), 1 / 2 / 3 steps: gpt6.2b-p8-m24 at
# 0.5p 5774.9 / 5794.9 / 4475.7 (one step: a long refutation, then nothing found);
# gpt1.5b-p8-m24 at 0.5p 2715.0 / 2097.9 / 2097.9; at limit 6 the optimum 1527.3 proven
# with each (on one core under load, two wall-time runs of 30 s proved it in 13 s).
LONG_STEPS = 3
# A stop however small the steps get (each probe has its own time limit besides).
MAX_PROBES = 64

ProbeStatus = Literal["refuted", "optimal", "found", "unknown"]


@dataclass(frozen=True)
class Answer:
    """A probe's answer for a cap U (all in ticks).

    Attributes:
        status: ``refuted`` (no schedule has objective <= U), ``optimal`` (`value` is the
            optimum), ``found`` (a schedule of objective `value` <= U, not proven), or
            ``unknown`` (the probe's time ran out with neither).
        value: the best objective the probe found (``found`` and ``optimal``).
        bound: the probe's own proven bound (0 when it proved nothing).
    """

    status: ProbeStatus
    value: int | None = None
    bound: int = 0


@dataclass(frozen=True)
class Bracket:
    """Where the optimum lies after the search: lower <= optimum <= upper (ticks).

    `upper` is the starting one unless a probe found better; `proven` when they meet.
    """

    lower: int
    upper: int
    probes: int

    @property
    def proven(self) -> bool:
        return self.lower >= self.upper


def rise_to_optimum(probe: Callable[[int, bool], Answer], lower: int, upper: int,
                    on_bound: Callable[[int], None] | None = None) -> Bracket:
    """Probe caps from `lower` up (and bisect once a schedule is found) until the bracket
    closes or a probe answers ``unknown``.

    Each cap is first probed briefly (``probe(cap, False)``). A cap left ``unknown`` is
    probed again with a long limit (``probe(cap, True)``) only right after a brief probe
    that settled its cap: there the model refutes fast, so the cap that resists is where
    the optimum lies (gpt1.5b-p8-m24 at limit 6); where even the first cap resists, or a
    refutation needed the long limit, the probes stop early and leave the time to others
    (hetero-p8-m32 at 0.375p, see `solver.cpsat.PHASES`).

    Args:
        probe: answers for a cap U in ticks, briefly or with a long limit.
        lower: a proven lower bound on the objective, in ticks.
        upper: the objective of a known schedule, in ticks.
        on_bound: called with each raised lower bound (for progress lines).
    """
    found = False
    settled_briefly = False  # the last brief probe refuted its cap or found a schedule
    probes = 0
    while lower < upper and probes < MAX_PROBES:
        step = max(1, math.ceil(lower * STEP_FRACTION))
        # Both sides known: halve the bracket; else one step up.
        cap = (lower + upper) // 2 if found else min(upper - 1, lower + step)
        answer = probe(cap, False)
        probes += 1
        if answer.status == "unknown" and settled_briefly:
            # The long probe goes LONG_STEPS steps higher: where the brief one resisted,
            # refuting gets hard, and a cap a little above the optimum is searched fast.
            cap = max(cap, min(upper - 1, lower + LONG_STEPS * step))
            answer = probe(cap, True)
            probes += 1
            settled_briefly = False
        else:
            settled_briefly = answer.status != "unknown"
        if answer.status == "refuted":
            lower = cap + 1
        elif answer.status == "optimal" and answer.value is not None:
            if on_bound is not None:
                on_bound(answer.value)
            return Bracket(answer.value, min(upper, answer.value), probes)
        elif answer.status == "found" and answer.value is not None:
            found = True
            upper = min(upper, answer.value)
            lower = max(lower, answer.bound)
        else:
            break
        if on_bound is not None:
            on_bound(lower)
    return Bracket(min(lower, upper), upper, probes)
