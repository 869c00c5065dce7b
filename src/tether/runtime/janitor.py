"""Retention: delete ended runs past their expiry, in batches, oldest expiry first; audit
rows older than the audit retention (TETHER_AUDIT_RETENTION_DAYS), when one is set; and
notifications older than their retention (TETHER_NOTIFY_RETENTION_DAYS)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from tether.storage import access, outbox, retention
from tether.storage.driver import Database
from tether.storage.errors import StorageError

logger = logging.getLogger(__name__)


async def sweep(pool: Database, *, batch: int = 500) -> int:
    """Delete every expired run now, one batch at a time; returns how many were deleted."""

    async def expired(limit: int) -> int:
        return len(await retention.delete_expired(pool, limit))

    return await _in_batches(expired, batch)


async def sweep_audit(pool: Database, *, days: float, batch: int = 1000) -> int:
    """Delete every audit row older than `days`, one batch at a time; returns how many."""
    return await _in_batches(lambda limit: access.delete_old_audit(pool, days, limit), batch)


async def sweep_notifications(pool: Database, keep_s: float, *, batch: int = 500) -> int:
    """Delete every notification older than `keep_s` seconds (but a live run's announcements
    of its waits), one batch at a time; returns how many were deleted."""
    return await _in_batches(lambda limit: outbox.delete_old(pool, keep_s, limit), batch)


async def _in_batches(delete: Callable[[int], Awaitable[int]], batch: int) -> int:
    """Call `delete(batch)` until it deletes fewer than `batch` rows; how many in all."""
    total = 0
    while True:
        deleted = await delete(batch)
        total += deleted
        if deleted < batch:
            return total


async def run(
    pool: Database,
    *,
    interval_s: float = 60.0,
    batch: int = 500,
    audit_retention_days: float | None = None,
    notify_retention_s: float | None = None,
) -> None:
    """Sweep every `interval_s` until cancelled; database errors are logged and retried."""
    while True:
        try:
            deleted = await sweep(pool, batch=batch)
            if deleted:
                logger.info("retention deleted %d ended runs", deleted)
            if audit_retention_days is not None:
                deleted = await sweep_audit(pool, days=audit_retention_days)
                if deleted:
                    logger.info("audit retention deleted %d rows", deleted)
            if notify_retention_s is not None:
                deleted = await sweep_notifications(pool, notify_retention_s, batch=batch)
                if deleted:
                    logger.info("notification retention deleted %d rows", deleted)
        except StorageError:
            logger.warning("retention sweep failed; will retry")
        await asyncio.sleep(interval_s)
