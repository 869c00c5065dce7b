"""Routes: how this process connects to a database URL — the prepared-statement cache a
transaction pooler needs off, and the direct URL the LISTEN connection goes to, checked on
every connection by a NOTIFY sent through the database URL."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest

from tests.conftest import direct_url
from tether.storage import pool
from tether.storage.driver import Queryable
from tether.storage.notify import PROBE_CHANNEL, READY_CHANNEL, Listener
from tether.testing.databases import Databases

pytestmark = pytest.mark.postgres


def another_url(dsn: str) -> str:
    """Another URL of the same database (a parameter the driver accepts and ignores here)."""
    return f"{dsn}{'&' if '?' in dsn else '?'}target_session_attrs=any"


def test_routes_nest_per_url_and_removing_one_restores_the_one_before() -> None:
    """The last route of a URL wins until it is removed; other URLs keep theirs; a URL
    without one is reached directly with the default cache."""
    assert pool.route_of("postgresql://a/x") == pool.Route(pool.DEFAULT_STATEMENT_CACHE_SIZE)
    outer = pool.route("postgresql://a/x", pool.Route(0, "postgresql://direct/x"))
    inner = pool.route("postgresql://a/x", pool.Route(5))
    try:
        assert pool.route_of("postgresql://a/x") == pool.Route(5)
        assert pool.route_of("postgresql://b/x") == pool.Route()
        inner()
        assert pool.route_of("postgresql://a/x") == pool.Route(0, "postgresql://direct/x")
    finally:
        outer()
        inner()  # a second removal is a no-op
    assert pool.route_of("postgresql://a/x") == pool.Route()


def test_routed_with_nothing_to_say_leaves_the_route_in_force() -> None:
    """`routed` with neither a cache size nor a LISTEN URL installs nothing, so a route
    installed before (a test database's) still applies inside the block."""
    remove = pool.route("postgresql://a/x", pool.Route(0, "postgresql://direct/x"))
    try:
        with pool.routed("postgresql://a/x"):
            assert pool.route_of("postgresql://a/x") == pool.Route(0, "postgresql://direct/x")
        with pool.routed("postgresql://a/x", statement_cache_size=7):
            assert pool.route_of("postgresql://a/x") == pool.Route(7)
        assert pool.route_of("postgresql://a/x").statement_cache_size == 0
    finally:
        remove()


async def _prepared(conn: Queryable) -> int:
    """Named prepared statements on `conn`'s backend after a statement with a parameter."""
    await conn.fetchval("SELECT $1::int", 1)
    count: int = await conn.fetchval("SELECT count(*) FROM pg_prepared_statements")
    return count


async def test_a_url_routed_without_a_cache_prepares_no_named_statements(db_url: str) -> None:
    """With a statement cache of 0 (a transaction pooler's route) neither a single connection
    nor the pool leaves a named prepared statement on its backend; the default cache does
    (our choice: a statement prepared on one of the pooler's server connections is unknown on
    the next)."""
    dsn = direct_url(db_url)  # the backend's own view of what this connection prepared
    cached = await pool.connect(dsn)
    try:
        assert await _prepared(cached) > 0
    finally:
        await cached.close()
    with pool.routed(dsn, statement_cache_size=0):
        plain = await pool.connect(dsn)
        db = await pool.create_pool(dsn, min_size=1, max_size=1)
    try:
        assert await _prepared(plain) == 0
        async with db.acquire() as conn:
            assert await _prepared(conn) == 0
    finally:
        await plain.close()
        await db.close()


@pytest.fixture
async def other_db(tether_databases: Databases) -> AsyncIterator[str]:
    """A second database on the test server."""
    url = await tether_databases.create()
    try:
        yield url
    finally:
        await tether_databases.drop(url)


@contextlib.asynccontextmanager
async def running(listener: Listener) -> AsyncIterator[None]:
    """The listener's loop, for the block."""
    task = asyncio.create_task(listener.run())
    try:
        yield
    finally:
        listener.stop()
        await asyncio.wait_for(task, 10)


async def test_the_listener_listens_where_the_route_says_and_hears_the_database(
    db_url: str,
) -> None:
    """A route's LISTEN URL (here another URL of the same database) is where the listener
    connects; it passes the delivery check, becomes ready and delivers NOTIFYs sent through
    the database URL."""
    listen = another_url(direct_url(db_url))
    cache = pool.route_of(db_url).statement_cache_size
    heard: asyncio.Queue[str] = asyncio.Queue()
    with pool.routed(db_url, statement_cache_size=cache, listen_dsn=listen):
        listener = Listener(db_url, max_backoff=0.2)
        listener.subscribe(READY_CHANNEL, lambda _c, payload: heard.put_nowait(payload))
        async with running(listener):
            async with asyncio.timeout(10):
                await listener.ready.wait()
            conn = await pool.connect(db_url)
            try:
                # The delivery check ran (it runs only when LISTEN goes to another URL): its
                # channel is the last one the LISTEN connection listened to.
                listening = await conn.fetch(
                    "SELECT query FROM pg_stat_activity"
                    " WHERE query LIKE 'LISTEN%' AND datname = current_database()"
                )
                await conn.execute("SELECT pg_notify($1, 'x')", READY_CHANNEL)
            finally:
                await conn.close()
            async with asyncio.timeout(10):
                while await heard.get() != "x":
                    pass
    assert [r["query"] for r in listening] == [f'LISTEN "{PROBE_CHANNEL}"']


async def test_a_listen_url_that_hears_nothing_sent_to_the_database_is_never_ready(
    db_url: str, other_db: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A LISTEN URL naming another database (as one through a transaction pooler or on a
    replica would) fails the delivery check: the listener logs why, naming both, stays not
    ready and tries again (our choice: polling alone must not pass for LISTEN)."""
    caplog.set_level(logging.ERROR, logger="tether.storage.notify")
    cache = pool.route_of(db_url).statement_cache_size
    with pool.routed(db_url, statement_cache_size=cache, listen_dsn=direct_url(other_db)):
        listener = Listener(db_url, max_backoff=0.2, check_timeout_s=0.2)
        async with running(listener):
            async with asyncio.timeout(10):
                while len([r for r in caplog.records if "heard no notification" in r.message]) < 2:
                    assert not listener.ready.is_set()
                    await asyncio.sleep(0.02)
            assert not listener.ready.is_set()
    (first, *_) = [r.message for r in caplog.records if "heard no notification" in r.message]
    assert f"{urlsplit(other_db).path} heard no notification sent through" in first
    assert f"{urlsplit(db_url).path} within" in first
    password = urlsplit(db_url).password
    assert not password or password not in first
