"""Admission storage: queue admission under a per-queue lock, singleton start checks, and cron
schedule rows (see sql/migrations/0004_add_admission.sql). Every asyncpg error leaves as a
StorageError."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from tether.storage.driver import Database
from tether.storage.errors import translated
from tether.storage.queries import Q
from tether.storage.repo import Conn


async def queues_with_backlog(conn: Conn, queues: Sequence[str]) -> list[str]:
    """Those of `queues` that have queued runs."""
    with translated():
        recs = await conn.fetch(Q["queues_with_backlog"], list(queues))
    return [r["queue"] for r in recs]


async def admit(pool: Database, queue: str, limit: int) -> list[str]:
    """Admit queue `queue`'s oldest queued runs while fewer than `limit` of its runs hold a
    slot; the ids admitted. Atomic across processes: one admitter per queue at a time."""
    with translated():
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(Q["lock_queue"], queue)
            recs = await conn.fetch(Q["admit_queued"], queue, limit)
    return [r["id"] for r in recs]


async def lock_workflow_starts(conn: Conn, workflow: str) -> None:
    """Serialize singleton starts of `workflow` until the caller's transaction ends."""
    with translated():
        await conn.execute(Q["lock_workflow_starts"], workflow)


async def live_run_of_workflow(
    conn: Conn, workflow: str, tenant: str | None, *, count_queued: bool
) -> str | None:
    """The id of a live run of `workflow` in `tenant` (None: no tenant); queued runs count
    only with `count_queued`."""
    with translated():
        value = await conn.fetchval(Q["live_run_of_workflow"], workflow, count_queued, tenant)
    return str(value) if value is not None else None


async def ensure_schedule(conn: Conn, workflow: str, cron: str, since: datetime) -> None:
    with translated():
        await conn.execute(Q["ensure_schedule"], workflow, cron, since)


async def lock_schedule(conn: Conn, workflow: str, cron: str) -> datetime | None:
    """The schedule's last tick, row locked; None when another scheduler holds it (or it is
    not registered)."""
    with translated():
        value = await conn.fetchval(Q["lock_schedule"], workflow, cron)
    return value if isinstance(value, datetime) else None


async def set_schedule_tick(conn: Conn, workflow: str, cron: str, tick: datetime) -> None:
    with translated():
        await conn.execute(Q["set_schedule_tick"], workflow, cron, tick)


async def cancel_queued(conn: Conn, execution_id: str, error: Any) -> bool:
    """End a run still waiting in its queue `cancelled`; False when it is not queued."""
    with translated():
        return await conn.fetchrow(Q["cancel_queued"], execution_id, error) is not None
