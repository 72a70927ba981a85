"""The nearest accepted name to a misspelt one, for the "did you mean" of error messages
(a profile field, a method, an advisor or request field)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable


def _folded(name: str) -> str:
    # Case, spaces, dashes and underscores do not tell names apart here: `zbh1` is
    # `zb-h1`, `memor y_limt` is close to `memory_limit`.
    return re.sub(r"[^0-9a-z]", "", name.lower())


def closest_name(name: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The choice `name` most likely meant, or None when none is close."""
    by_folded: dict[str, str] = {}
    for choice in choices:
        by_folded.setdefault(_folded(choice), choice)
    folded = _folded(str(name))
    if folded in by_folded:
        return by_folded[folded]
    close = difflib.get_close_matches(folded, list(by_folded), n=1, cutoff=cutoff)
    return by_folded[close[0]] if close else None


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``did you mean 'x'? `` for the closest choice, or "" when none is close."""
    close = closest_name(name, choices)
    return f"did you mean '{close}'? " if close is not None and close != name else ""
