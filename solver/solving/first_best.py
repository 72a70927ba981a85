"""The first-best fold over candidates, searching only those that can change it.

`solve` answers with the first candidate layout's result, replaced by each later one that
beats the answer so far by more than `EPS` (the earlier layout wins a tie). A layout's
search may take seconds (the single-chunk search of p = 128, m = 1024 takes 6 s), and a
lower bound over every schedule of the layout often shows that its result cannot change
the answer: at 1p the single-chunk bound of gpt1.5b-p8-m24 is 1309.5, above V's 1185.15.
`first_best` gives exactly the fold's answer, calling the search only where a bound does
not settle a comparison.

A search also learns the value under which its result can matter (`below`): once an
earlier candidate's value v is known, a later one changes the answer only below v, so
its search may give up on what cannot get there (the loop2 search of p = 128,
m = 1024 at 0.5p, raced against V's answer, costs 23% of its whole search: 0.61 s of
2.66 s, in-process).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T", bound=tuple[object, ...])

EPS = 1e-9
"""By how much a later candidate must beat the answer so far to replace it."""


def first_best(bounds: Sequence[float], search: Callable[[int, float], T],
               ) -> tuple[int, T]:
    """The index and result of the fold's answer over candidates ``0 .. n-1``.

    Args:
        bounds: each candidate's lower bound on the value its search returns.
        search: (candidate index, below) -> result, whose last item is its value (called
            at most once per index). ``below`` is the least value of the candidates
            before it searched so far (inf: none): the search must return its own
            answer where that is below ``below``, and otherwise may return any result
            whose value is not below it (inf: none). Such a result cannot change the
            fold: a candidate before it either became the answer or did not beat the
            answer then by `EPS`, so when the fold reaches this one the answer is at
            most that value plus `EPS`, which this one does not beat; and a candidate
            that is not the answer at its turn never is.

    The candidates are searched by least bound first while a bound is below the best
    value found by more than `EPS` (the likeliest answers first), then the fold runs in
    the candidates' order and searches whatever a comparison still needs: a candidate
    whose bound is not below the answer so far by more than `EPS` cannot replace it, and
    one whose value is below the answer so far's bound by more than `EPS` replaces it
    whatever that value is.
    """
    if not bounds:
        raise ValueError("first_best needs at least one candidate")
    found: dict[int, T] = {}
    values: dict[int, float] = {}

    def value(i: int) -> float:
        if i not in found:
            below = min((v for k, v in values.items() if k < i), default=math.inf)
            found[i] = search(i, below)
            result = found[i][-1]
            assert isinstance(result, (int, float))
            values[i] = float(result)
        return values[i]

    for i in sorted(range(len(bounds)), key=lambda k: bounds[k]):
        least = min((value(k) for k in found), default=float("inf"))
        if bounds[i] < least - EPS:
            value(i)

    def beats(i: int, answer: int) -> bool:
        """Whether candidate i's value is below the answer's by more than EPS."""
        if i not in found and answer not in found:
            value(answer)
        if i not in found and bounds[i] >= value(answer) - EPS:
            return False
        if answer not in found and value(i) < bounds[answer] - EPS:
            return True
        return value(i) < value(answer) - EPS

    answer = 0
    for i in range(1, len(bounds)):
        if beats(i, answer):
            answer = i
    value(answer)
    return answer, found[answer]
