"""Retention: ended runs are deleted in batches once their retention has passed (the janitor)."""

from __future__ import annotations

from tether.storage.errors import translated
from tether.storage.queries import Q
from tether.storage.repo import Conn


async def delete_expired(conn: Conn, batch: int) -> list[str]:
    with translated():
        recs = await conn.fetch(Q["delete_expired"], batch)
    return [r["id"] for r in recs]
