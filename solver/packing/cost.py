"""The cost of a microbatch from its samples' lengths (DESIGN.md 6.2's packing front-end).

A sample of ``s`` tokens costs ``a*s^2 + b*s`` in time (attention grows with the square of
its own length, everything else with its tokens: packed samples are masked from each
other, so a microbatch costs the sum over its samples) and ``c*s`` in memory. B and W
scale as F unless given their own coefficients. The base profile's per-stage times and
memory are those of a reference microbatch (one sample of ``reference_tokens`` tokens);
a microbatch's scale is its cost over the reference's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ppsched.solver.model.errors import ProfileError


class CostModelError(ProfileError):
    """A cost model a user gave is not acceptable (the field, the value, what is accepted)."""


@dataclass(frozen=True)
class Quadratic:
    """``time(s) = a*s^2 + b*s`` for one sample of ``s`` tokens (any time unit)."""

    a: float
    b: float

    def of(self, lengths: Sequence[int]) -> float:
        """The time of a microbatch holding samples of these lengths."""
        return math.fsum(self.a * s * s + self.b * s for s in lengths)


@dataclass(frozen=True, kw_only=True)
class CostModel:
    """How a microbatch's time and memory follow from its samples' lengths."""

    forward: Quadratic = Quadratic(0.0, 1.0)
    """F's ``a, b``; the default (0, 1) is time proportional to tokens."""
    memory_per_token: float = 1.0
    """``c``: memory grows as ``c*s`` (only the ratio to the reference matters for the
    profile's scales; ``c`` sets the memory figures the summary prints)."""
    backward: Quadratic | None = None
    """B's own ``a, b`` (None: B scales as F)."""
    weight: Quadratic | None = None
    """W's own ``a, b`` (None: W scales as F)."""

    def __post_init__(self) -> None:
        for name, q in (("cost", self.forward), ("cost_b", self.backward),
                        ("cost_w", self.weight)):
            if q is None:
                continue
            for letter, x in (("a", q.a), ("b", q.b)):
                if not (math.isfinite(x) and x >= 0):
                    raise CostModelError(f"{name}.{letter}", x, "a finite number >= 0")
            if q.a == 0 and q.b == 0:
                raise CostModelError(name, (q.a, q.b), "a, b not both 0 (every sample "
                                     "would cost nothing)")
        c = self.memory_per_token
        if not (math.isfinite(c) and c > 0):
            raise CostModelError("cost.c", c, "a finite number > 0 (memory per token)")

    @property
    def uniform_kinds(self) -> bool:
        """True when B and W scale as F (one scale per microbatch suffices)."""
        return all(q is None or _proportional(q, self.forward)
                   for q in (self.backward, self.weight))

    def time(self, lengths: Sequence[int]) -> float:
        """F's time of a microbatch of these sample lengths, in the cost model's unit."""
        return self.forward.of(lengths)

    def memory(self, lengths: Sequence[int]) -> float:
        return self.memory_per_token * sum(lengths)

    def scales(self, lengths: Sequence[int], reference_tokens: int) -> tuple[float, float,
                                                                             float, float]:
        """(F, B, W, memory) scales of a microbatch relative to the reference microbatch
        (one sample of `reference_tokens` tokens)."""
        ref = [reference_tokens]
        f = self.forward.of(lengths) / self.forward.of(ref)
        b = (self.backward.of(lengths) / self.backward.of(ref)) if self.backward else f
        w = (self.weight.of(lengths) / self.weight.of(ref)) if self.weight else f
        return f, b, w, sum(lengths) / reference_tokens


def _proportional(q: Quadratic, r: Quadratic) -> bool:
    return math.isclose(q.a * r.b, q.b * r.a, rel_tol=1e-12, abs_tol=0.0)


def parse_coefficients(text: str, field: str, count: int) -> tuple[float, ...]:
    """``"a,b[,c]"`` as numbers; a ProfileError naming `field` otherwise."""
    parts = [x.strip() for x in text.split(",")]
    try:
        values = tuple(float(x) for x in parts)
    except ValueError:
        values = ()
    if len(values) != count:
        names = ",".join("abc"[:count])
        raise CostModelError(field, text, f"{count} comma-separated numbers {names} "
                             "(time = a*s^2 + b*s" + (", memory = c*s)" if count == 3 else ")"))
    return values


def fit_quadratic(points: Sequence[tuple[float, float]], field: str = "points") -> Quadratic:
    """Least-squares ``a, b >= 0`` of ``t = a*s^2 + b*s`` through profiled points ``(s, t)``.

    No intercept: a sample of no tokens costs nothing. When the unconstrained fit has a
    negative coefficient, the best fit with that coefficient at 0 is taken instead.

    Raises:
        CostModelError: fewer than 2 distinct lengths, or a point that is not finite and
            positive.
    """
    for i, (s, t) in enumerate(points):
        if not (math.isfinite(s) and math.isfinite(t) and s > 0 and t >= 0):
            raise CostModelError(f"{field}[{i}]", (s, t), "a pair (tokens > 0, time >= 0)")
    if len({s for s, _ in points}) < 2:
        raise CostModelError(field, list(points), "profiled (tokens, time) points at "
                             "2 or more different lengths")
    if any(s > 1e12 or t > 1e30 for s, t in points):
        raise CostModelError(field, list(points)[:3], "tokens <= 1e12 and times <= 1e30 "
                             "(their fourth powers must stay finite)")
    # Normal equations of min sum (a s^2 + b s - t)^2.
    s4 = math.fsum(s ** 4 for s, _ in points)
    s3 = math.fsum(s ** 3 for s, _ in points)
    s2 = math.fsum(s ** 2 for s, _ in points)
    ts2 = math.fsum(t * s * s for s, t in points)
    ts = math.fsum(t * s for s, t in points)
    det = s4 * s2 - s3 * s3
    a = (ts2 * s2 - ts * s3) / det
    b = (s4 * ts - s3 * ts2) / det
    if a < 0:
        a, b = 0.0, ts / s2
    elif b < 0:
        a, b = ts2 / s4, 0.0
    if a == 0 and b == 0:
        raise CostModelError(field, list(points), "points whose times are not all 0")
    return Quadratic(a, b)
