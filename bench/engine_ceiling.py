"""The commit ceiling of bench/engine.py, and the commit counter of its measurements.

The ceiling is what the PostgreSQL server under test can commit: ``LANES`` connections, each
inserting one row per transaction (autocommit ``INSERT``) back to back for ``seconds``, into a
fresh table of a fresh database; commits/s = rows / seconds. A run that needs C commits can
then at best go at ceiling / C runs/s, the figure bench/engine.py holds each system against.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
from dbos_side import _create_database, _drop_database, _with_database

LANES = 16


async def commit_ceiling(dsn: str, seconds: float = 3.0, lanes: int = LANES) -> float:
    """Single-row INSERT commits per second from `lanes` connections (see the docstring)."""
    name = await _create_database(dsn, "ceiling_bench")
    try:
        db_url = _with_database(dsn, name)
        setup = await asyncpg.connect(db_url)
        await setup.execute("CREATE TABLE ceiling (id bigserial PRIMARY KEY, lane int NOT NULL)")
        await setup.close()
        conns = [await asyncpg.connect(db_url) for _ in range(lanes)]
        counts = [0] * lanes
        deadline = 0.0

        async def lane(i: int) -> None:
            insert = await conns[i].prepare("INSERT INTO ceiling (lane) VALUES ($1)")
            while time.perf_counter() < deadline:
                await insert.fetch(i)
                counts[i] += 1

        started = time.perf_counter()
        deadline = started + seconds
        await asyncio.gather(*(lane(i) for i in range(lanes)))
        elapsed = time.perf_counter() - started
        for conn in conns:
            await conn.close()
        return sum(counts) / elapsed
    finally:
        await _drop_database(dsn, name)


async def commits(dsn: str, database: str) -> int:
    """Transactions committed in `database` so far (pg_stat_database.xact_commit, read from
    the server's maintenance database, so reading it adds none). A backend reports its
    counts when it goes idle (at most once a second) and when it exits: read this after the
    measured processes have exited."""
    conn = await asyncpg.connect(dsn)
    try:
        value = await conn.fetchval(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", database
        )
        return int(value or 0)
    finally:
        await conn.close()
