"""The PostgreSQL back end of the store (``PPSCHED_DATABASE_URL=postgresql://...``), for
several replicas on one database. psycopg 3, one autocommit connection per replica
serialised by a lock; the lease protocol's atomic steps are conditional updates and
deletes, which PostgreSQL's row locks order between replicas."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from ppsched.api.service.store.base import (
    SCHEMA,
    TENANT_COLUMN,
    TENANT_INDEX,
    Store,
    StoreSettingError,
)
from ppsched.solver.model import install_command

log = logging.getLogger(__name__)
# Any constant: replicas starting at once take it so that only one creates the tables
# (concurrent CREATE TABLE IF NOT EXISTS can fail on PostgreSQL's catalogue).
_SCHEMA_LOCK = 0x70707363


class PostgresStore(Store):
    """The store in a PostgreSQL database."""

    def __init__(self, url: str) -> None:
        try:
            import psycopg
        except ImportError:
            raise StoreSettingError("PPSCHED_DATABASE_URL: a postgresql:// URL needs psycopg "
                                    f"3; accepted: {install_command('service')}") from None
        self._psycopg = psycopg
        self.url = url
        host = url.split("@", 1)[-1]  # never log a password
        self.description = f"PostgreSQL {host}"
        self._lock = threading.Lock()
        self._db = self._connect()
        with self._session(transaction=True) as run:
            run("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))
            for statement in SCHEMA:
                run(statement, ())
            # A store written before tenants (issue 29) gets the owner column.
            run(f"ALTER TABLE jobs ADD COLUMN IF NOT EXISTS {TENANT_COLUMN}", ())
            run(TENANT_INDEX, ())

    def _connect(self) -> Any:
        try:
            return self._psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        except self._psycopg.OperationalError as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "unreachable"
            raise StoreSettingError(f"PPSCHED_DATABASE_URL: cannot connect to {self.description}"
                                    f" ({reason}); accepted: the URL of a running "
                                    "PostgreSQL server") from None

    def _execute(self, sql: str, params: Sequence[Any]) -> tuple[list[tuple[Any, ...]], int]:
        # The shared SQL uses `?`; psycopg's placeholder is `%s` (no SQL here has either
        # character in a literal).
        cursor = self._db.execute(sql.replace("?", "%s"), tuple(params))
        rows = cursor.fetchall() if cursor.description is not None else []
        return rows, cursor.rowcount

    def _transaction(self) -> AbstractContextManager[object]:
        return self._db.transaction()

    def _check_connection(self) -> None:
        if self._db.closed or self._db.broken:  # the server restarted: connect again
            log.warning("store connection lost; reconnecting to %s", self.description)
            self._db = self._connect()
