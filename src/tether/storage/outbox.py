"""The outbox of notifications to people (migration 0009): routes, claims, and the marks a
sender leaves. The rows themselves are written by triggers, in the transaction that opens,
answers or expires a wait or ends a run; nothing here writes one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tether.storage.errors import translated
from tether.storage.queries import Q
from tether.storage.repo import Conn


@dataclass(frozen=True)
class Route:
    """`workflow` ('*': every workflow) tells `channel` (its `recipient`: an address, or '')
    of `events`, and of the opening of waits of `kinds`."""

    workflow: str
    channel: str
    recipient: str
    events: tuple[str, ...]
    kinds: tuple[str, ...]


@dataclass(frozen=True)
class Notification:
    """A claimed outbox row: what to tell whom, and which attempt this claim is."""

    id: int
    delivery_id: str
    channel: str
    recipient: str
    event: str
    execution_id: str
    data: dict[str, Any]
    created_at: datetime
    attempt: int


async def set_routes(conn: Conn, routes: Sequence[Route]) -> None:
    """Make the stored routes exactly `routes`."""
    wanted = [
        {
            "workflow": r.workflow,
            "channel": r.channel,
            "recipient": r.recipient,
            "events": list(r.events),
            "kinds": list(r.kinds),
        }
        for r in routes
    ]
    with translated():
        await conn.execute(Q["set_notify_routes"], wanted)


async def claim(
    conn: Conn, owner: str, channels: Sequence[str], limit: int, lease_s: float
) -> list[Notification]:
    """Claim up to `limit` due notifications of `channels` for `lease_s` seconds."""
    with translated():
        recs = await conn.fetch(Q["claim_notifications"], owner, list(channels), limit, lease_s)
    return [
        Notification(
            id=r["id"],
            delivery_id=r["delivery_id"],
            channel=r["channel"],
            recipient=r["recipient"],
            event=r["event"],
            execution_id=r["execution_id"],
            data=r["data"],
            created_at=r["created_at"],
            attempt=r["attempts"],
        )
        for r in recs
    ]


async def mark_sent(conn: Conn, note: Notification, owner: str) -> bool:
    """Record `note` delivered; False when this claim ran out (another sender holds it)."""
    with translated():
        got = await conn.fetchval(Q["mark_notification_sent"], note.id, owner, note.attempt)
    return got is not None


async def retry(
    conn: Conn, note: Notification, owner: str, delay_s: float | None, error: str
) -> bool:
    """Record a failed attempt: due again in `delay_s` seconds, or given up (None). False when
    this claim ran out (another sender holds it)."""
    with translated():
        got = await conn.fetchval(
            Q["retry_notification"], note.id, owner, note.attempt, delay_s, error
        )
    return got is not None


async def delete_old(conn: Conn, keep_s: float, batch: int) -> int:
    """Delete up to `batch` rows older than `keep_s` seconds (but a live run's announcements
    of its waits); returns how many."""
    with translated():
        recs = await conn.fetch(Q["delete_old_notifications"], keep_s, batch)
    return len(recs)
