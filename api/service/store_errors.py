"""Store errors counted where they happen: each public method of the store, on this one
instance, is wrapped so that an exception it raises adds one to a counter (by operation
and exception class, both bounded sets) before it goes on to its caller unchanged.
Callers keep handling errors as before (a 503, a retry); the count is what shows a
database in trouble on a dashboard."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from ppsched.api.service.store import Store

Count = Callable[[str, str], None]
"""count(operation, error class name)."""


def count_errors(store: Store, count: Count) -> Store:
    """`store`, its public methods counting their exceptions with `count`."""
    for name, method in inspect.getmembers(store, inspect.ismethod):
        if not name.startswith("_") and name != "close":
            setattr(store, name, _counting(name, method, count))
    return store


def _counting(name: str, method: Callable[..., Any], count: Count) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except Exception as exc:
            count(name, type(exc).__name__)
            raise
    return call
