"""The cleanup task: every PPSCHED_RETENTION_INTERVAL_S, stored results older than
PPSCHED_RETENTION_AGE_S go, then the oldest until they total PPSCHED_RETENTION_MAX_BYTES
(a test run once grew the store to 296 MB with nothing ever expiring)."""

from __future__ import annotations

import asyncio
import logging

from ppsched.api.service.config import Settings
from ppsched.api.service.store import Store

log = logging.getLogger(__name__)


async def cleanup(store: Store, settings: Settings) -> None:
    """Run until cancelled; a failed pass is logged and the next one tried."""
    while True:
        try:
            removed = await asyncio.to_thread(store.prune, settings.retention_age_s,
                                              settings.retention_max_bytes)
            if removed:
                log.info("retention: %d stored results deleted", removed)
        except Exception:  # a store hiccup must not end the task
            log.exception("retention pass")
        await asyncio.sleep(settings.retention_interval_s)
