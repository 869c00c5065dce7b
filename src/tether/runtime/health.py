"""Readiness checks and the metrics snapshot of one running runtime.

Readiness: the database answers, its migrations are current, LISTEN is in force, and this
process's workers are running (when it runs any). Each check is bounded, so a probe against a
database that went away answers "not ready" instead of hanging.
"""

from __future__ import annotations

import asyncio
from typing import Final

from tether.observability.exposition import NotificationBacklog, QueueBacklog, Snapshot
from tether.runtime.service import Runtime
from tether.storage import observing
from tether.storage.errors import StorageError, translated
from tether.storage.rows import STATUSES

CHECK_TIMEOUT_S: Final = 2.0


async def readiness(rt: Runtime, *, timeout_s: float = CHECK_TIMEOUT_S) -> dict[str, bool]:
    """Each check by name: `database`, `migrations`, `listener`, `workers`."""
    database = migrations = False
    try:
        async with asyncio.timeout(timeout_s):
            with translated():
                async with rt.pool.acquire() as conn:
                    migrations = await observing.migrations_current(conn)
                    database = True
    except (StorageError, TimeoutError, OSError):
        pass
    return {
        "database": database,
        "migrations": migrations,
        "listener": rt.listener.ready.is_set(),
        "workers": all(w.running.is_set() for w in rt.workers),
    }


async def snapshot(rt: Runtime, *, timeout_s: float = CHECK_TIMEOUT_S) -> Snapshot:
    """Runs by status, queue backlogs and notification backlogs from the database, and this
    process's pool, listener and worker state. A database that does not answer yields
    `database_up = 0` and no database gauges."""
    counts: dict[str, int] = {}
    queues: list[QueueBacklog] = []
    notes: list[NotificationBacklog] = []
    up = True
    try:
        async with asyncio.timeout(timeout_s):
            with translated():
                async with rt.pool.acquire() as conn:
                    found = await observing.status_counts(conn)
                    queues = [QueueBacklog(*q) for q in await observing.queue_backlog(conn)]
                    notes = [
                        NotificationBacklog(*n) for n in await observing.notification_backlog(conn)
                    ]
        counts = dict.fromkeys(STATUSES, 0) | found
    except (StorageError, TimeoutError, OSError):
        up = False
    pool = rt.pool
    size = getattr(pool, "get_size", lambda: 0)()
    idle = getattr(pool, "get_idle_size", lambda: 0)()
    return Snapshot(
        runs_by_status=counts,
        queues=queues,
        notifications=notes,
        database_up=up,
        listening=rt.listener.ready.is_set(),
        workers_running=sum(w.running.is_set() for w in rt.workers),
        pool_size=size,
        pool_idle=idle,
        pool_max=pool.get_max_size(),
    )
