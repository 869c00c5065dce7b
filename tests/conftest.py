"""Shared fixtures: a real PostgreSQL (TETHER_DATABASE_URL, or embedded via pgserver), one
migrated template database per session, and a fresh database per test cloned from it — the
test kit's own (`tether.testing`: its pytest plugin's `tether_databases`), which the suite uses
as any user's suite would."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import asyncpg
import pytest

from tether.runtime.scratch import with_database as with_database  # tests import it from here
from tether.storage import pool
from tether.testing.databases import Databases

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

# The kit's fixtures: the entry point loads them where the package's metadata is installed;
# naming them here also loads them from a source tree (PYTHONPATH=src), never twice.
pytest_plugins = ["tether.testing.pytest_plugin"]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failing test marked `upstream(note)` pins another project's behaviour: its report gets
    a section with the note, which says what to do when a new lock changed that behaviour."""
    report = yield
    marker = item.get_closest_marker("upstream")
    if marker is not None and report.failed:
        report.sections.append(("upstream: what to do", marker.args[0]))
    return report


def direct_url(dsn: str) -> str:
    """`dsn` with no connection pooler in between: where its LISTEN connection goes (with the
    suite run through PgBouncer, the server itself), else `dsn` as it is."""
    return pool.route_of(dsn).listen_dsn or dsn


def database_env(dsn: str) -> dict[str, str]:
    """The TETHER_* variables of a `tether` process of a test on database `dsn`: its URL and,
    when the suite goes through a pooler, the statement cache and the direct LISTEN URL this
    process uses for it."""
    env = {"TETHER_DATABASE_URL": dsn}
    route = pool.route_of(dsn)
    if route.statement_cache_size != pool.DEFAULT_STATEMENT_CACHE_SIZE:
        env["TETHER_STATEMENT_CACHE_SIZE"] = str(route.statement_cache_size)
    if route.listen_dsn is not None:
        env["TETHER_LISTEN_DATABASE_URL"] = route.listen_dsn
    return env


@pytest.fixture(scope="session")
def server_url(tether_databases: Databases) -> str:
    """The test server's DSN (its maintenance database)."""
    return tether_databases.server_url


@pytest.fixture(scope="session")
def template_db(tether_databases: Databases) -> str:
    """The migrated template database's name on that server."""
    return tether_databases.template


@pytest.fixture
async def db_url(tether_databases: Databases) -> AsyncIterator[str]:
    url = await tether_databases.create()
    try:
        yield url
    finally:
        await tether_databases.drop(url)


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[asyncpg.Pool]:
    p = await pool.create_pool(db_url, min_size=1, max_size=10)
    try:
        yield p
    finally:
        await p.close()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on for the test, every finished span kept in memory (SDK processor, no export)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tether.observability import tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)
    try:
        yield exporter
    finally:
        tracing.disable()
