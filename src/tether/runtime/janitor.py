"""Retention: delete ended runs past their expiry, in batches, oldest expiry first; audit
rows older than the audit retention (TETHER_AUDIT_RETENTION_DAYS), when one is set; and
notifications older than their retention (TETHER_NOTIFY_RETENTION_DAYS)."""

from __future__ import annotations

import asyncio
import logging

from tether.runtime import audit
from tether.storage import outbox, retention
from tether.storage.driver import Database
from tether.storage.errors import StorageError

logger = logging.getLogger(__name__)


async def sweep(pool: Database, *, batch: int = 500) -> int:
    """Delete every expired run now, one batch at a time; returns how many were deleted."""
    total = 0
    while True:
        deleted = await retention.delete_expired(pool, batch)
        total += len(deleted)
        if len(deleted) < batch:
            return total


async def sweep_notifications(pool: Database, keep_s: float, *, batch: int = 500) -> int:
    """Delete every notification older than `keep_s` seconds (but a live run's announcements
    of its waits), one batch at a time; returns how many were deleted."""
    total = 0
    while True:
        deleted = await outbox.delete_old(pool, keep_s, batch)
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
                deleted = await audit.sweep(pool, days=audit_retention_days)
                if deleted:
                    logger.info("audit retention deleted %d rows", deleted)
            if notify_retention_s is not None:
                deleted = await sweep_notifications(pool, notify_retention_s, batch=batch)
                if deleted:
                    logger.info("notification retention deleted %d rows", deleted)
        except StorageError:
            logger.warning("retention sweep failed; will retry")
        await asyncio.sleep(interval_s)
