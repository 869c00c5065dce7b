"""The database's clock seen from a test: `tether_now()` (migration 0008) made to run ahead of
now() by an amount the test sets, and what a skipping clock reads to decide when to move it.

Only tether.testing's time skipping uses this, and only on a test's own database: a server's
database keeps the migration's `tether_now()`, which is now(). Every asyncpg error leaves as a
StorageError.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from tether.storage.driver import Connection, Queryable
from tether.storage.errors import translated
from tether.storage.queries import Q


@dataclass(frozen=True)
class Outlook:
    """The database's time, whether any run is due or held by a live worker at that time, and
    the earliest wake-up after it (None: no run has one)."""

    now: datetime
    busy: bool
    next_wake: datetime | None


async def run_ahead(conn: Queryable) -> None:
    """Make the database's clock one that runs ahead of now() by what `set_ahead` sets (zero
    until then). Once per database; a second call raises StorageError."""
    with translated():
        await conn.execute(Q["run_clock_ahead"])


async def set_ahead(conn: Connection, ahead: timedelta) -> list[str]:
    """Move the clock to `ahead` of now() (never back) and wake the workers for every run due
    at the new time, in one transaction; the ids of those runs."""
    with translated():
        async with conn.transaction():
            await conn.execute(Q["set_clock_ahead"], ahead)
            rows = await conn.fetch(Q["wake_due_runs"])
    return [r["id"] for r in rows]


async def outlook(conn: Queryable, lost: Sequence[str] = ()) -> Outlook:
    """What a skipping clock reads; `lost`: `id:attempt` of runs whose worker died on that
    attempt (their lease is not a worker at work: it only waits to expire)."""
    with translated():
        row = await conn.fetchrow(Q["clock_outlook"], list(lost))
    assert row is not None  # noqa: S101 — a SELECT without FROM returns one row
    return Outlook(row["now"], row["busy"], row["next_wake"])
