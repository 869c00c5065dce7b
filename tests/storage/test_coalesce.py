"""Coalesced row reads (storage/coalesce.py) on a real PostgreSQL: right rows for every reader,
fewer statements than reads, read-your-writes, errors and cancellation per reader."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from tests.waiting import until
from tether.storage import pool as tpool
from tether.storage.coalesce import RowReader
from tether.storage.errors import DatabaseUnavailable
from tether.storage.rows import ExecutionRow

pytestmark = pytest.mark.postgres

INSERT = """
INSERT INTO executions (id, workflow, business_id, status, root_id, last_event_id, details)
SELECT id, 'wf', id, 'running', id, 0, 'v0' FROM unnest($1::text[]) AS id
"""


class CountingPool:
    """A real pool that counts the statements sent through it and can hold them back."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.statements = 0
        self.gate = asyncio.Event()
        self.gate.set()

    async def fetchrow(
        self, query: str, *args: object, timeout: float | None = None
    ) -> asyncpg.Record | None:
        self.statements += 1
        await self.gate.wait()
        return await self.pool.fetchrow(query, *args, timeout=timeout)

    async def fetch(
        self, query: str, *args: object, timeout: float | None = None
    ) -> list[asyncpg.Record]:
        self.statements += 1
        await self.gate.wait()
        return await self.pool.fetch(query, *args, timeout=timeout)

    async def fetchval(
        self, query: str, *args: object, column: int = 0, timeout: float | None = None
    ) -> Any:
        self.statements += 1
        await self.gate.wait()
        return await self.pool.fetchval(query, *args, column=column, timeout=timeout)

    async def execute(self, query: str, *args: object, timeout: float | None = None) -> str:
        self.statements += 1
        await self.gate.wait()
        return await self.pool.execute(query, *args, timeout=timeout)


def ids(n: int) -> list[str]:
    return [f"ex_{i:032d}" for i in range(n)]


async def test_every_reader_gets_its_row_and_reads_share_statements(
    db: asyncpg.Pool,
) -> None:
    present = ids(20)
    await db.execute(INSERT, present)
    counting = CountingPool(db)
    reader = RowReader(counting, max_statements=2)
    wanted = [*present, *present[:5], "ex_missing_000000000000000000000000"] * 3
    rows = await asyncio.gather(*(reader.get(i) for i in wanted))
    for want, row in zip(wanted, rows, strict=True):
        assert (row.id if row else None) == (None if "missing" in want else want)
    assert counting.statements < len(wanted) / 4  # 78 reads
    assert reader._in_flight == 0 and not reader._queued


async def test_a_read_never_joins_a_statement_already_sent(db: asyncpg.Pool) -> None:
    """Read-your-writes: a read asked after a commit sees it, even while an older read of the
    same row is still in flight."""
    [run_id] = ids(1)
    await db.execute(INSERT, [run_id])
    counting = CountingPool(db)
    reader = RowReader(counting, max_statements=1)
    counting.gate.clear()
    older = asyncio.create_task(reader.get(run_id))
    await until(lambda: counting.statements == 1, what="the older read's statement, held")
    await db.execute("UPDATE executions SET details = 'v1' WHERE id = $1", run_id)
    newer = asyncio.create_task(reader.get(run_id))
    # queued behind the statement in flight, not attached to it
    await until(lambda: reader._queued, what="the newer read queued")
    assert not newer.done()
    counting.gate.set()
    first, second = await asyncio.gather(older, newer)
    assert first is not None and second is not None
    assert second.details == "v1"
    assert counting.statements == 2


async def test_a_lost_database_fails_every_queued_reader_with_its_own_error(
    db_url: str,
) -> None:
    p = await tpool.create_pool(db_url, min_size=1, max_size=2)
    counting = CountingPool(p)
    reader = RowReader(counting, max_statements=1)
    counting.gate.clear()
    readers = [asyncio.create_task(reader.get(i)) for i in ids(6)]
    # one statement sent (held at the gate), the five other reads queued behind it
    await until(lambda: counting.statements == 1 and len(reader._queued) == 5, what="the reads")
    await p.close()
    counting.gate.set()
    results = await asyncio.gather(*readers, return_exceptions=True)
    assert all(isinstance(r, DatabaseUnavailable) for r in results), results
    assert len({id(r) for r in results}) == len(results)  # one exception object each
    assert reader._in_flight == 0 and not reader._queued


async def test_a_cancelled_reader_leaves_the_others_their_rows(db: asyncpg.Pool) -> None:
    present = ids(4)
    await db.execute(INSERT, present)
    counting = CountingPool(db)
    reader = RowReader(counting, max_statements=1)
    counting.gate.clear()
    tasks = [asyncio.create_task(reader.get(i)) for i in present]
    await until(lambda: counting.statements == 1 and len(reader._queued) == 3, what="the reads")
    tasks[2].cancel()
    counting.gate.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[2], asyncio.CancelledError)
    assert [r.id for r in results if isinstance(r, ExecutionRow)] == [
        present[0],
        present[1],
        present[3],
    ]
    assert reader._in_flight == 0 and not reader._queued


class SlowReleasePool:
    """A real pool whose connections go back to it only once `gate` opens; its own statement
    methods check a connection out and wait for its release, as asyncpg's pool does."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.gate = asyncio.Event()
        self.released = 0

    def acquire(self) -> Any:
        return self.pool.acquire()

    async def release(self, connection: Any) -> None:
        try:
            await self.gate.wait()
        finally:  # cancelled too: the pool gets it back, so that it can close
            await self.pool.release(connection)
        self.released += 1

    async def _checked_out(self, method: str, query: str, *args: object) -> Any:
        connection = await self.pool.acquire()
        try:
            return await getattr(connection, method)(query, *args)
        finally:
            await self.release(connection)

    async def fetchrow(self, query: str, *args: object, timeout: float | None = None) -> Any:
        return await self._checked_out("fetchrow", query, *args)

    async def fetch(self, query: str, *args: object, timeout: float | None = None) -> Any:
        return await self._checked_out("fetch", query, *args)

    async def fetchval(
        self, query: str, *args: object, column: int = 0, timeout: float | None = None
    ) -> Any:
        return await self._checked_out("fetchval", query, *args)

    async def execute(self, query: str, *args: object, timeout: float | None = None) -> Any:
        return await self._checked_out("execute", query, *args)

    def get_max_size(self) -> int:
        return self.pool.get_max_size()


async def test_a_read_answers_before_its_connection_is_back_in_the_pool(
    db: asyncpg.Pool,
) -> None:
    """A reader gets its row as soon as it arrives: giving the connection back to the pool
    (several turns of the event loop in asyncpg) happens after, on a task of the reader's."""
    present = ids(3)
    await db.execute(INSERT, present)
    slow = SlowReleasePool(db)
    reader = RowReader(slow, max_statements=1)
    try:
        async with asyncio.timeout(5):
            alone = await reader.get(present[0])
            batched = await asyncio.gather(*(reader.get(i) for i in present))
    finally:
        released_by_then = slow.released
        slow.gate.set()  # the pool closes after the test: no connection left held
    assert alone is not None and alone.id == present[0]
    assert [r.id if r else None for r in batched] == present
    assert released_by_then == 0  # every connection was still on its way back
    await until(lambda: slow.released == 3 and not reader._releases, what="the releases")
    assert db.get_idle_size() == db.get_size()  # back in the pool, none lost
