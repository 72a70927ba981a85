"""The store: schedules (content-addressed JSON) and jobs, so results and jobs survive a
restart of the service and replicas share one job queue.

`base.Store` holds the SQL; `sqlite.SqliteStore` (one embedded file, the default) and
`postgres.PostgresStore` (``PPSCHED_DATABASE_URL`` names a PostgreSQL server) run it.
`open_store` picks one; psycopg, an optional dependency, is imported only when a
PostgreSQL store opens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppsched.api.service.store.base import (
    FINAL_STATUSES,
    JOB_STATUSES,
    SCHEMA,
    JobRecord,
    Run,
    Store,
    StoreSettingError,
    StoreUnavailable,
)
from ppsched.api.service.store.postgres import PostgresStore
from ppsched.api.service.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from ppsched.api.service.config import Settings

__all__ = ["FINAL_STATUSES", "JOB_STATUSES", "SCHEMA", "JobRecord", "PostgresStore", "Run",
           "SqliteStore", "Store", "StoreSettingError", "StoreUnavailable", "open_store"]


def open_store(settings: Settings) -> Store:
    """PostgreSQL when `database_url` is set, else the SQLite file at `db_path`.

    Raises:
        StoreSettingError: `database_url` is not a postgresql:// URL.
    """
    url = settings.database_url
    if not url:
        return SqliteStore(settings.db_path)
    if not url.startswith(("postgresql://", "postgres://")):
        raise StoreSettingError(f"PPSCHED_DATABASE_URL: {url.split(':', 1)[0]!r} is not a "
                                "database this service can use; accepted: a "
                                "postgresql://user@host:port/dbname URL, or unset for SQLite")
    return PostgresStore(url, pool_size=settings.store_pool_size,
                         connect_timeout_s=settings.store_connect_timeout_s,
                         checkout_timeout_s=settings.store_checkout_timeout_s)
