"""The embedded back end of the store (the default): one SQLite file, one connection
serialised by the store's lock, WAL journal so readers of other processes are not blocked."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ppsched.api.service.store.base import (
    ADDED_COLUMNS,
    SCHEMA,
    TENANT_INDEX,
    Store,
    StoreUnavailable,
)


class SqliteStore(Store):
    """The store in one SQLite file."""

    def __init__(self, path: Path) -> None:
        path = Path(path)
        if str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.description = f"SQLite {path}"
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=10000")
        self._lock = threading.Lock()
        with self._session(transaction=True) as run:
            for statement in SCHEMA:
                run(statement, ())
            columns = {row[1] for row in run("PRAGMA table_info(jobs)", ())[0]}
            for name, kind in ADDED_COLUMNS:
                if name not in columns:  # a store written by an older version
                    run(f"ALTER TABLE jobs ADD COLUMN {name} {kind}", ())
            run(TENANT_INDEX, ())

    @property
    def shared_path(self) -> str | None:
        return None if str(self.path) == ":memory:" else str(self.path)

    def _execute(self, sql: str, params: Sequence[Any]) -> tuple[list[tuple[Any, ...]], int]:
        try:
            cursor = self._db.execute(sql, tuple(params))
        except sqlite3.OperationalError as exc:
            # Another process held the file's write lock past busy_timeout: the store is
            # busy, not broken (503 with Retry-After); any other error is a bug (500).
            if "locked" in str(exc) or "busy" in str(exc):
                raise StoreUnavailable(f"the store ({self.description}) is busy: {exc}"
                                       ) from None
            raise
        return cursor.fetchall(), cursor.rowcount

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        # BEGIN IMMEDIATE takes the write lock at once: two replicas cannot both claim.
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
