"""The PostgreSQL back end of the store (``PPSCHED_DATABASE_URL=postgresql://...``), for
several replicas on one database. psycopg 3 with its connection pool (`psycopg_pool`):
each store call checks out an autocommit connection, checked on checkout so that one
left broken by a restart of the server is replaced rather than used; the lease
protocol's atomic steps are conditional updates and deletes, which PostgreSQL's row
locks order between replicas.

While the database is down, a call waits at most PPSCHED_STORE_CHECKOUT_TIMEOUT_S for a
connection and raises `StoreUnavailable` (503 with Retry-After); after one such failure
the next calls wait only briefly (`_DOWN_CHECKOUT_S`), so that the event loop is not
held a full timeout per call until the pool reconnects by itself."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ppsched.api.service.store.base import (
    ADDED_COLUMNS,
    SCHEMA,
    TENANT_INDEX,
    Run,
    Store,
    StoreSettingError,
    StoreUnavailable,
)
from ppsched.solver.model import install_command

log = logging.getLogger(__name__)
# Any constant: replicas starting at once take it so that only one creates the tables
# (concurrent CREATE TABLE IF NOT EXISTS can fail on PostgreSQL's catalogue).
_SCHEMA_LOCK = 0x70707363
# The checkout wait while the database is known to be down: long enough for a pooled
# connection that is free to be handed over, short enough not to stall the event loop.
_DOWN_CHECKOUT_S = 0.05


class PostgresStore(Store):
    """The store in a PostgreSQL database."""

    def __init__(self, url: str, pool_size: int = 4, connect_timeout_s: float = 5.0,
                 checkout_timeout_s: float = 2.0) -> None:
        try:
            import psycopg
            import psycopg_pool
        except ImportError:
            raise StoreSettingError("PPSCHED_DATABASE_URL: a postgresql:// URL needs psycopg "
                                    f"3 and psycopg_pool; accepted: {install_command('service')}"
                                    ) from None
        self._psycopg, self._psycopg_pool = psycopg, psycopg_pool
        self.url = url
        host = url.split("@", 1)[-1]  # never log a password
        self.description = f"PostgreSQL {host}"
        self._lock = threading.Lock()  # guards `_down` only: the pool serialises the rest
        self._checkout_s = checkout_timeout_s
        self._down = False
        self._pool = psycopg_pool.ConnectionPool(
            url, min_size=1, max_size=pool_size, open=False, timeout=checkout_timeout_s,
            kwargs={"autocommit": True, "connect_timeout": max(1, round(connect_timeout_s))},
            check=psycopg_pool.ConnectionPool.check_connection, name="ppsched-store")
        try:
            self._pool.open(wait=True, timeout=connect_timeout_s)
        except psycopg_pool.PoolTimeout:
            self._pool.close()
            raise StoreSettingError(f"PPSCHED_DATABASE_URL: cannot connect to {self.description}"
                                    f" within {connect_timeout_s:g} s; accepted: the URL of a "
                                    "running PostgreSQL server") from None
        with self._session(transaction=True) as run:
            run("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))
            for statement in SCHEMA:
                run(statement, ())
            for name, kind in ADDED_COLUMNS:  # a store written by an older version
                run(f"ALTER TABLE jobs ADD COLUMN IF NOT EXISTS {name} {kind}", ())
            run(TENANT_INDEX, ())

    def close(self) -> None:
        self._pool.close()

    @contextmanager
    def _session(self, transaction: bool = False) -> Iterator[Run]:
        psycopg, pool = self._psycopg, self._psycopg_pool
        timeout = _DOWN_CHECKOUT_S if self._down else self._checkout_s
        try:
            with self._pool.connection(timeout=timeout) as conn:
                def run(sql: str, params: Sequence[Any]) -> tuple[list[tuple[Any, ...]], int]:
                    # The shared SQL uses `?`; psycopg's placeholder is `%s` (no SQL here
                    # has either character in a literal).
                    cursor = conn.execute(sql.replace("?", "%s"), tuple(params))
                    rows = cursor.fetchall() if cursor.description is not None else []
                    return rows, cursor.rowcount

                if transaction:
                    with conn.transaction():
                        yield run
                else:
                    yield run
        except (psycopg.OperationalError, pool.PoolTimeout, pool.PoolClosed) as exc:
            self._mark(down=True, reason=exc)
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "no answer"
            raise StoreUnavailable(f"the store ({self.description}) does not answer: "
                                   f"{type(exc).__name__}: {reason}") from None
        self._mark(down=False)

    def _mark(self, down: bool, reason: BaseException | None = None) -> None:
        with self._lock:
            if down == self._down:
                return
            self._down = down
        if down:
            log.error("store down: %s (%s: %s); calls answer 503 until it returns",
                      self.description, type(reason).__name__, reason)
        else:
            log.warning("store back: %s", self.description)
