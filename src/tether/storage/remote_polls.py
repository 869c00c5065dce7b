"""Remote polls (migration 0010): when each remote task a parked run waits on is polled next.

A remote call schedules its poll as it parks (`schedule`); the runtime's poller takes due polls
(`claim`, a lease on each), then either makes them due again (`reschedule`) or drops them
(`drop`) when it woke the run or the call is over. A remote's stream telling of a change makes
the task's poll due now (`hasten`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tether.storage.driver import Database
from tether.storage.errors import PayloadUnreadable, translated
from tether.storage.queries import Q
from tether.storage.repo import Conn
from tether.storage.rows import StepRecord


@dataclass(frozen=True)
class DuePoll:
    """A poll that is due: the run, its call's position, the run's status and the call's
    record (None when it is gone: a run-level retry dropped it; or when this process cannot
    open it, `unreadable`: sealed with a key it lacks)."""

    execution_id: str
    seq: int
    status: str
    record: StepRecord | None
    unreadable: bool = False


def _due(row: Any) -> DuePoll:
    if row["kind"] is None:
        return DuePoll(row["execution_id"], row["seq"], row["status"], None)
    try:
        record = StepRecord.from_mapping(row, row["execution_id"])
    except PayloadUnreadable:
        return DuePoll(row["execution_id"], row["seq"], row["status"], None, unreadable=True)
    return DuePoll(row["execution_id"], row["seq"], row["status"], record)


async def schedule(conn: Conn, execution_id: str, seq: int, due_at: datetime) -> None:
    """Poll call `seq` of the run at `due_at` (replacing an earlier time)."""
    with translated():
        await conn.execute(Q["schedule_remote_poll"], execution_id, seq, due_at)


async def claim(db: Database, limit: int, lease_s: float) -> list[DuePoll]:
    """Take up to `limit` due polls for `lease_s` seconds. Raises StorageError."""
    async with translated(), db.acquire() as conn:
        rows = await conn.fetch(Q["claim_remote_polls"], limit, lease_s)
    return [_due(r) for r in rows]


async def reschedule(conn: Conn, polls: Sequence[tuple[str, int, float]]) -> None:
    """Make each `(execution_id, seq, after_s)` due again `after_s` seconds from now."""
    if not polls:
        return
    ids, seqs, after = zip(*polls, strict=True)
    with translated():
        await conn.execute(Q["reschedule_remote_polls"], list(ids), list(seqs), list(after))


async def hasten(conn: Conn, polls: Sequence[tuple[str, int]]) -> None:
    """Make each `(execution_id, seq)` poll due now (one not due yet)."""
    if not polls:
        return
    ids, seqs = zip(*polls, strict=True)
    with translated():
        await conn.execute(Q["hasten_remote_polls"], list(ids), list(seqs))


async def drop(conn: Conn, polls: Sequence[tuple[str, int]]) -> None:
    """Forget each `(execution_id, seq)` poll."""
    if not polls:
        return
    ids, seqs = zip(*polls, strict=True)
    with translated():
        await conn.execute(Q["drop_remote_polls"], list(ids), list(seqs))
