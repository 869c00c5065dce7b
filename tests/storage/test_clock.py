"""The database's clock (`tether_now()`, migration 0008): every query reads it, on a server's
database it is now() inlined by the planner, and a test's database can make it run ahead."""

from __future__ import annotations

import re
from datetime import timedelta

import asyncpg
import pytest

from tether.storage import clock, pool, queries, repo
from tether.storage.errors import StorageError
from tether.storage.queries import Q

#: The two places that read now() itself: the skipping clock's definition (now() plus the
#: offset), and an admission stamp shifted by what tether_now() runs ahead of now().
READS_NOW = {"run_clock_ahead", "admit_queued"}


def test_no_query_reads_the_time_but_through_tether_now() -> None:
    """Every named query takes the time from tether_now() (our rule: one clock seam), so a
    test database that moves the clock moves every decision of what is due."""
    clocks = re.compile(
        r"(?<![_a-z])now\(\)|current_timestamp|localtimestamp|statement_timestamp|"
        r"transaction_timestamp",
        re.I,
    )
    offenders = {name for name, sql in Q.items() if clocks.search(sql)} - READS_NOW
    assert offenders == set()
    assert "tether_now()" in Q["claim_executions"]


@pytest.mark.postgres
async def test_the_production_clock_is_inlined_to_now(db: asyncpg.Pool) -> None:
    """On a migrated database tether_now() plans as now() itself: the claim's plan shows
    now(), not a function call, so production queries run as they did before the seam."""
    plan = "\n".join(
        r[0]
        for r in await db.fetch(
            "EXPLAIN (VERBOSE) SELECT id FROM executions WHERE wake_at <= tether_now()"
        )
    )
    assert "now()" in plan and "tether_now" not in plan


async def _insert(db: asyncpg.Pool, run_id: str) -> None:
    await repo.insert_execution(db, repo.NewExecution(run_id, "w", run_id, None))


@pytest.mark.postgres
async def test_a_clock_run_ahead_moves_every_due_decision(db: asyncpg.Pool) -> None:
    """After run_ahead and set_ahead(2 h), tether_now() is two hours ahead of now(), a run
    waking in an hour is due and woken, and the clock never moves back."""
    async with db.acquire() as conn:
        await clock.run_ahead(conn)
    await _insert(db, "ex_later")
    await db.execute(
        "UPDATE executions SET status = 'waiting', wake_at = now() + interval '1 hour'"
    )
    before = await clock.outlook(db)
    assert not before.busy and before.next_wake is not None
    assert timedelta(minutes=59) < before.next_wake - before.now <= timedelta(hours=1)
    async with db.acquire() as conn:
        woken = await clock.set_ahead(conn, timedelta(hours=2))
        assert woken == ["ex_later"]
        ahead = await conn.fetchval("SELECT tether_now() - now()")
        assert ahead == timedelta(hours=2)
        await clock.set_ahead(conn, timedelta(hours=1))
        assert await conn.fetchval("SELECT tether_now() - now()") == timedelta(hours=2)
    after = await clock.outlook(db)
    assert after.busy and after.next_wake is None


@pytest.mark.postgres
async def test_the_outlook_counts_a_lease_held_by_a_live_worker_but_not_a_dead_one(
    db: asyncpg.Pool,
) -> None:
    """A running run is busy work, unless its claim is named lost: then its lease expiry is
    only the next wake-up."""
    await _insert(db, "ex_held")
    (row,) = await repo.claim(db, "w1", 30, 1)
    held = await clock.outlook(db)
    assert held.busy
    lost = await clock.outlook(db, [f"{row.id}:{row.attempt}"])
    assert not lost.busy and lost.next_wake == row.lease_until
    other_claim = await clock.outlook(db, [f"{row.id}:{row.attempt + 1}"])
    assert other_claim.busy


def test_the_skipping_clock_is_defined_once_and_reads_its_table() -> None:
    """run_clock_ahead replaces tether_now() with now() plus the stored offset."""
    sql = queries.Q["run_clock_ahead"]
    assert "CREATE OR REPLACE FUNCTION tether_now()" in sql
    assert "SELECT now() + (SELECT ahead FROM tether_clock_ahead)" in sql


@pytest.mark.postgres
async def test_a_second_run_ahead_on_one_database_is_refused(db_url: str) -> None:
    """The clock is made to run ahead once per database; again raises StorageError."""
    conn = await pool.connect(db_url)
    try:
        await clock.run_ahead(conn)
        with pytest.raises(StorageError):
            await clock.run_ahead(conn)
    finally:
        await conn.close()
