"""Cron schedules: exactly one run per tick across any number of schedulers over
one database, no catch-up storm after downtime. Time is passed in; nothing sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from tether.runtime.admission import Admission
from tether.runtime.context import Context
from tether.runtime.operations.env import Env
from tether.runtime.registry import App
from tether.runtime.scheduler import Scheduler, due_ticks, tick, tick_key
from tether.storage import pool
from tether.storage.driver import Queryable

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
EVERY_5 = "*/5 * * * *"


def _app() -> App:
    app = App()

    @app.workflow(schedule=EVERY_5, labels=["kind=cron"])
    async def report(ctx: Context) -> None:
        return None

    return app


def test_due_ticks_after_downtime_start_only_the_latest_tick_by_default() -> None:
    """No catch-up storm: an hour down on a 5-minute schedule starts one run, not twelve."""
    assert due_ticks(EVERY_5, T0, T0 + timedelta(hours=1, seconds=30)) == [T0 + timedelta(hours=1)]


def test_due_ticks_with_catchup_all_start_the_most_recent_missed_ticks_up_to_the_cap() -> None:
    last, now = T0, T0 + timedelta(minutes=22)
    assert due_ticks(EVERY_5, last, now, "all", cap=10) == [
        T0 + timedelta(minutes=m) for m in (5, 10, 15, 20)
    ]
    assert due_ticks(EVERY_5, last, now, "all", cap=2) == [
        T0 + timedelta(minutes=m) for m in (15, 20)
    ]


def test_due_ticks_include_a_tick_exactly_at_now_and_never_the_last_one_again() -> None:
    assert due_ticks(EVERY_5, T0, T0 + timedelta(minutes=5)) == [T0 + timedelta(minutes=5)]
    assert due_ticks(EVERY_5, T0, T0) == []
    assert due_ticks(EVERY_5, T0, T0 + timedelta(minutes=4, seconds=59)) == []


@pytest.fixture
async def envs(db_url: str) -> AsyncIterator[tuple[Env, Env]]:
    """Two schedulers' environments: separate pools (as two servers would have), one database."""
    app = _app()
    a = await pool.create_pool(db_url, min_size=1, max_size=4)
    b = await pool.create_pool(db_url, min_size=1, max_size=4)
    try:
        yield Env(a, app), Env(b, app)
    finally:
        await a.close()
        await b.close()


async def _runs(db: Queryable) -> list[str]:
    rows = await db.fetch("SELECT idempotency_key FROM executions ORDER BY idempotency_key")
    return [r["idempotency_key"] for r in rows]


@pytest.mark.postgres
async def test_two_schedulers_start_exactly_one_run_per_tick(envs: tuple[Env, Env]) -> None:
    """Both schedulers tick at the same instants, concurrently: each tick has one run."""
    one, two = envs
    assert await tick(one, T0) == []  # first sight: the schedule starts now, no past runs
    for minutes in (5, 10, 15):
        now = T0 + timedelta(minutes=minutes, seconds=1)
        for _ in range(3):
            await asyncio.gather(tick(one, now), tick(two, now), tick(one, now))
    assert await _runs(one.pool) == [
        tick_key("report", T0 + timedelta(minutes=m)) for m in (5, 10, 15)
    ]
    labels = await one.pool.fetchval("SELECT DISTINCT labels FROM executions")
    assert labels == {"kind": "cron"}


@pytest.mark.postgres
async def test_no_catch_up_storm_after_downtime(envs: tuple[Env, Env]) -> None:
    """Down for a day: the next tick starts only the latest missed tick; with catch-up 'all'
    it starts at most the cap."""
    one, _ = envs
    await tick(one, T0)
    started = await tick(one, T0 + timedelta(days=1, minutes=2))
    assert [r.idempotency_key for r in started] == [tick_key("report", T0 + timedelta(days=1))]
    storm = Env(one.pool, one.app, admission=Admission(catchup="all", catchup_cap=3))
    later = await tick(storm, T0 + timedelta(days=1, minutes=31))
    assert [r.idempotency_key for r in later] == [
        tick_key("report", T0 + timedelta(days=1, minutes=m)) for m in (20, 25, 30)
    ]


@pytest.mark.postgres
async def test_the_scheduler_loop_ticks_then_sleeps_until_the_next_tick(
    envs: tuple[Env, Env],
) -> None:
    """The loop ticks, sleeps until the next tick (here: the clock is already there), ticks
    again and starts that tick's run, then sleeps until it is stopped."""
    one, _ = envs
    times = [T0, T0 + timedelta(minutes=5), T0 + timedelta(minutes=5, seconds=1)]
    second_tick_done = asyncio.Event()

    def clock() -> datetime:
        if len(times) == 1:  # asked after the second tick: how long to sleep
            second_tick_done.set()
            return times[0]
        return times.pop(0)

    scheduler = Scheduler(one, clock=clock)
    assert scheduler.next_wake(T0 + timedelta(minutes=1)) == T0 + timedelta(minutes=5)
    task = asyncio.create_task(scheduler.run())
    try:
        async with asyncio.timeout(5):
            await second_tick_done.wait()
    finally:
        scheduler.stop()
        async with asyncio.timeout(5):
            await task
    assert await _runs(one.pool) == [tick_key("report", T0 + timedelta(minutes=5))]
