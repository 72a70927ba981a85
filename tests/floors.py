"""Floors under conditional assertions.

A property test whose check runs only on some draws (a build the heuristic may refuse, a
named schedule that may not fit the limit) could pass with the check never running. Such a
test runs its Hypothesis body through `Tally`: the body notes, per draw, whether its check
ran, and the test then asserts that it ran on at least a floor of the draws. Each floor is
set well under the rate measured over several Hypothesis seeds (quoted beside it), so it
fails when the check stops running, not on an unlucky draw.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Tally:
    """How many draws a property test's conditional check ran on, of all its draws."""

    label: str
    draws: int = 0
    checked: int = 0

    def note(self, checked: bool) -> bool:
        """Counts one draw; returns `checked` so the caller can branch on it."""
        self.draws += 1
        self.checked += bool(checked)
        return checked

    def assert_floor(self, fraction: float) -> None:
        """The check ran on at least `fraction` of the draws (and there were draws)."""
        assert self.draws > 0, f"{self.label}: no draw ran"
        assert self.checked >= fraction * self.draws, (
            f"{self.label}: checked on {self.checked} of {self.draws} draws, under the "
            f"floor of {fraction:.0%}: the conditional assertion has stopped running")
