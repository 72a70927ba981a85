"""Readiness names its reason: a store that does not answer makes /readyz say "not
ready" and leaves the cause in the log (review finding 17)."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
from ppsched.api.service.routers import health


class _DownStore:
    description = "SQLite /nowhere/store.sqlite3"

    def ping(self) -> bool:
        raise OSError("disk I/O error")


def test_a_store_that_does_not_answer_is_not_ready_and_the_reason_is_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    state: Any = SimpleNamespace(store=_DownStore())
    with caplog.at_level(logging.WARNING, logger=health.__name__):
        assert health._store_ok(state) is False
    assert "SQLite /nowhere/store.sqlite3" in caplog.text
    assert "OSError: disk I/O error" in caplog.text
