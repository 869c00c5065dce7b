"""The audit table (migration 0007): append-only, and its own retention applied by the janitor
(TETHER_AUDIT_RETENTION_DAYS)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

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
        assert await janitor.sweep_audit(db, days=7) == 1
        assert [e.principal for e in await audit.list_entries(db)] == ["q"]


async def test_the_audit_sweep_goes_on_until_a_batch_comes_back_short(db_url: str) -> None:
    """Our choice: retention deletes in batches, as many as it takes, and counts them all."""
    long_ago = datetime.now(UTC) - timedelta(days=10)
    async with database(db_url) as db:
        kept = audit.entry(principal="kept", surface="cli", method="runs/list", outcome="ok")
        old = [
            audit.entry(principal=f"old{i}", surface="mcp", method="tools/call", outcome="ok")
            for i in range(3)
        ]
        await audit.write(db, [*(e.__class__(**{**vars(e), "at": long_ago}) for e in old), kept])
        assert await janitor.sweep_audit(db, days=7, batch=2) == 3
        assert [e.principal for e in await audit.list_entries(db)] == ["kept"]


async def test_a_bad_entry_is_dropped_and_never_holds_back_the_rest(db_url: str) -> None:
    """A request's text the database cannot take is cleaned when recorded (NUL, a lone
    surrogate, length); an entry the database still refuses (here a surface outside its CHECK)
    is dropped on its own while the rest of its batch is written. Before, the batch failed on
    every retry and the queue grew for as long as the server ran (CI: a fuzzed tool name)."""
    async with database(db_url) as db:
        writer = audit.AuditWriter(db, flush_s=0.05)
        runner = asyncio.create_task(writer.run())
        try:
            good: dict[str, Any] = {
                "principal": "p",
                "surface": "mcp",
                "method": "tools/call",
                "outcome": "ok",
            }
            writer.record(audit.entry(**good, tool="a\x00b", execution_id="x\ud800" + "y" * 5000))
            writer.record(audit.entry(**{**good, "surface": "nowhere"}))
            writer.record(audit.entry(**good, tool="after"))
            async with asyncio.timeout(10):
                await writer.wait_written(2)
        finally:
            writer.stop()
            await runner
        rows = await audit.list_entries(db)
    assert writer.written == 2
    by_tool = {e.tool: e for e in rows}
    assert set(by_tool) == {"a\ufffdb", "after"}
    assert len(by_tool["a\ufffdb"].execution_id or "") == 1000
    assert (by_tool["a\ufffdb"].execution_id or "").startswith("x\ufffd")
