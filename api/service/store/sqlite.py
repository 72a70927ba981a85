"""The embedded back end of the store (the default): one SQLite file, one connection
serialised by the store's lock, WAL journal so readers of other processes are not blocked."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ppsched.api.service.store.base import SCHEMA, TENANT_COLUMN, TENANT_INDEX, Store


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
            if "ends" not in columns:  # a store written by an older version
                run("ALTER TABLE jobs ADD COLUMN ends INTEGER NOT NULL DEFAULT 0", ())
            if "tenant" not in columns:  # a store written before tenants (issue 29)
                run(f"ALTER TABLE jobs ADD COLUMN {TENANT_COLUMN}", ())
            run(TENANT_INDEX, ())

    def _execute(self, sql: str, params: Sequence[Any]) -> tuple[list[tuple[Any, ...]], int]:
        cursor = self._db.execute(sql, tuple(params))
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
