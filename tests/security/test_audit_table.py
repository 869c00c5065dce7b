"""The audit table (migration 0007): append-only, and its own retention applied by the janitor
(TETHER_AUDIT_RETENTION_DAYS)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from tether.runtime import audit, janitor
from tether.runtime.service import database

pytestmark = pytest.mark.postgres


async def test_audit_rows_cannot_be_updated_and_old_rows_are_swept(db_url: str) -> None:
    """An UPDATE is refused by a trigger; the janitor deletes rows older than the retention
    and keeps the rest."""
    now = datetime.now(UTC)
    async with database(db_url) as db:
        old = audit.entry(principal="p", surface="mcp", method="tools/call", outcome="ok")
        await audit.write(
            db,
            [
                old.__class__(**{**vars(old), "at": now - timedelta(days=10)}),
                audit.entry(principal="q", surface="cli", method="tokens/revoke", outcome="ok"),
            ],
        )
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await db.execute("UPDATE audit SET outcome = 'refused'")
        assert await janitor.sweep(db) == 0  # runs only
        assert await audit.sweep(db, days=7) == 1
        assert [e.principal for e in await audit.list_entries(db)] == ["q"]
