"""Improving solutions of an exact search, for whoever keeps the best so far (the service
checkpoints a job's schedule as CP-SAT improves it, so a crash keeps the improvement).

The search reports (its problem, the improving orders, their objective) here; `listening`
installs one process-wide listener, which `profile_for` gives the profile the problem
was resolved from (the solving pipeline knows it, the exact models see only the problem).
Process-wide, not a context variable: CP-SAT calls back from its own threads. The
listener is called on the search's thread: it must only take note and return.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ppsched.solver.model.ops import Orders
from ppsched.solver.model.problem import Problem

Listener = Callable[[Any, Orders, float], None]
"""Called with (the profile solved, the improving orders, their objective)."""

_lock = threading.Lock()
_listener: Listener | None = None
_profile: Any = None


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Send each improvement found in the block to `listener`."""
    global _listener
    with _lock:
        _listener = listener
    try:
        yield
    finally:
        with _lock:
            _listener = None


@contextmanager
def profile_for(profile: Any) -> Iterator[None]:
    """Improvements found in the block are of `profile`'s problem."""
    global _profile
    with _lock:
        previous, _profile = _profile, profile
    try:
        yield
    finally:
        with _lock:
            _profile = previous


def improved(problem: Problem, orders: Orders, objective: float) -> None:
    """An exact search found `orders` (re-timed objective `objective`), better than any
    before it in this search."""
    with _lock:
        listener, profile = _listener, _profile
    if listener is None or profile is None or profile.problem is not problem:
        return  # nobody listens, or a problem of its own (a relaxation, a probe)
    listener(profile, orders, objective)
