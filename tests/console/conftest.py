"""Console fixtures: a real Tether server on loopback with the console on and three tokens
(operator, reader, and an operator of another tenant), serving tests/apps/console.py."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import orjson
import pytest_asyncio

from tests.apps.console import app
from tests.conftest import direct_url
from tests.e2e.conftest import on_loopback, server_settings
from tether.app import create_app
from tether.runtime.operations import Operations
from tether.security import new_token
from tether.testing.databases import Databases


@dataclass(frozen=True)
class Site:
    base: str  # http://127.0.0.1:port
    tokens: dict[str, str]  # operator, reader, other (an operator of tenant "globex"), alice
    db_url: str
    ops: Operations  # the server's own (every tenant)

    def url(self, path: str) -> str:
        return f"{self.base}/console{path}"

    async def start(self, workflow: str, input: Any = None) -> str:
        """Start a run (bound to no tenant) and wait until it is parked; its execution id."""
        run_id = (await self.ops.start(workflow, {} if input is None else input)).execution.id
        view = await self.ops.wait_until(run_id, lambda r: r.status == "waiting", timeout=10)
        assert view.current.status == "waiting", view.current
        return run_id

    async def status(self, run_id: str) -> str:
        """The run's status, read from the database (what the console changed, or not)."""
        return str((await _row(self, run_id))["status"])

    async def output(self, run_id: str) -> Any:
        """The run's output once it has ended (waits up to 10 s)."""
        async with asyncio.timeout(10):
            while True:
                row = await _row(self, run_id)
                if row["status"] not in ("pending", "running", "waiting"):
                    return (
                        orjson.loads(row["output"])
                        if isinstance(row["output"], str)
                        else row["output"]
                    )
                await asyncio.sleep(0.05)

    async def audit_rows(self, run_id: str, count: int) -> list[asyncpg.Record]:
        """The run's console audit rows (principal, surface, method, outcome), oldest first, once
        `count` of them are written (the audit writer writes them behind the request)."""
        conn = await asyncpg.connect(direct_url(self.db_url))
        try:
            async with asyncio.timeout(5):
                while True:
                    rows = await conn.fetch(
                        "SELECT principal, surface, method, outcome FROM audit"
                        " WHERE surface = 'console' AND execution_id = $1 ORDER BY id",
                        run_id,
                    )
                    if len(rows) >= count:
                        return list(rows)
                    await asyncio.sleep(0.05)
        finally:
            await conn.close()


async def _row(site: Site, run_id: str) -> asyncpg.Record:
    conn = await asyncpg.connect(direct_url(site.db_url))
    try:
        row = await conn.fetchrow("SELECT status, output FROM executions WHERE id = $1", run_id)
    finally:
        await conn.close()
    assert row is not None
    return row


@contextlib.asynccontextmanager
async def console_site(db_url: str, **overrides: Any) -> AsyncIterator[Site]:
    tokens: dict[str, str] = {}
    entries = []
    for name, role, tenant in (
        ("operator", "operator", None),
        ("reader", "reader", None),
        ("other", "operator", "globex"),
        ("alice", "operator", None),  # one of the `vote` workflow's approvers
    ):
        token, entry = new_token(name, role, tenant)
        tokens[name] = token
        entries.append(entry)
    settings = server_settings(db_url, console=True, api_tokens=",".join(entries), **overrides)
    web = create_app(app, settings, db_url)
    async with on_loopback(web, "") as base:
        yield Site(base, tokens, db_url, web.state.runtime.ops)


#: One database and one server per test module (a module's tests start runs of their own).
@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_db(tether_databases: Databases) -> AsyncIterator[str]:
    url = await tether_databases.create()
    try:
        yield url
    finally:
        await tether_databases.drop(url)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def site(module_db: str) -> AsyncIterator[Site]:
    async with console_site(module_db) as s:
        yield s
