"""Reads for health checks and metrics: cheap, grouped, never keyed by anything a caller
chose. Every asyncpg error leaves as a StorageError."""

from __future__ import annotations

from tether.storage import migrate
from tether.storage.errors import translated
from tether.storage.queries import Q
from tether.storage.repo import Conn


async def status_counts(conn: Conn) -> dict[str, int]:
    """Runs by status (only the statuses present)."""
    with translated():
        recs = await conn.fetch(Q["status_counts"])
    return {r["status"]: r["n"] for r in recs}


async def queue_backlog(conn: Conn) -> list[tuple[str, int, float]]:
    """(queue, runnable runs not yet claimed, age of the oldest in seconds) per queue."""
    with translated():
        recs = await conn.fetch(Q["queue_backlog"])
    return [(r["queue"], r["depth"], max(r["oldest_age_s"], 0.0)) for r in recs]


async def notification_backlog(conn: Conn) -> list[tuple[str, int, float]]:
    """(channel, notifications neither delivered nor given up, age of the oldest in seconds)
    per channel a route names or a pending notification is for."""
    with translated():
        recs = await conn.fetch(Q["notification_backlog"])
    return [(r["channel"], r["pending"], max(r["oldest_age_s"], 0.0)) for r in recs]


async def migrations_current(conn: Conn) -> bool:
    """True when the newest bundled migration has been applied."""
    with translated():
        applied = await conn.fetchval(Q["applied_migration"])
    return int(applied) >= migrate.available()[-1].version
