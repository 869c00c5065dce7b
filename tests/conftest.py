"""Shared fixtures: a real PostgreSQL (TETHER_DATABASE_URL, or embedded via pgserver), one
migrated template database per session, and a fresh database per test cloned from it."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from tether.storage import embedded, migrate, pool

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

# One template per pytest-xdist worker: on a shared server (TETHER_DATABASE_URL) each worker
# builds and clones its own.
TEMPLATE = "tether_tmpl" + (
    f"_{os.environ['PYTEST_XDIST_WORKER']}" if "PYTEST_XDIST_WORKER" in os.environ else ""
)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failing test marked `upstream(note)` pins another project's behaviour: its report gets
    a section with the note, which says what to do when a new lock changed that behaviour."""
    report = yield
    marker = item.get_closest_marker("upstream")
    if marker is not None and report.failed:
        report.sections.append(("upstream: what to do", marker.args[0]))
    return report


def with_database(url: str, name: str) -> str:
    """The same server URL pointing at database `name`."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    url = os.environ.get("TETHER_DATABASE_URL")
    if url:
        yield url
        return
    # Short path: PostgreSQL's unix socket lives in the data directory (~107-byte limit).
    folder = Path(tempfile.mkdtemp(prefix="tpg", dir="/tmp"))
    os.chmod(folder, 0o755)  # noqa: S103 — pgserver runs PostgreSQL as another user when root
    server = embedded.start(folder)
    try:
        yield server.uri
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


async def _make_template(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
    finally:
        await conn.close()
    tconn = await pool.connect(with_database(url, TEMPLATE))
    try:
        await migrate.migrate(tconn)
    finally:
        await tconn.close()


@pytest.fixture(scope="session")
def template_db(server_url: str) -> str:
    asyncio.run(_make_template(server_url))
    return TEMPLATE


@pytest.fixture
async def db_url(server_url: str, template_db: str) -> AsyncIterator[str]:
    name = "t_" + secrets.token_hex(6)
    conn = await asyncpg.connect(server_url)
    try:
        await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    finally:
        await conn.close()
    try:
        yield with_database(server_url, name)
    finally:
        conn = await asyncpg.connect(server_url)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()


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
