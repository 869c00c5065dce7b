"""Console fixtures: a real Tether server on loopback with the console on and three tokens
(operator, reader, and an operator of another tenant), serving tests/apps/answering.py."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import orjson
import pytest

from tests.apps.answering import app
from tests.e2e.conftest import serve
from tether.security import new_token


@dataclass(frozen=True)
class Site:
    base: str  # http://127.0.0.1:port
    tokens: dict[str, str]  # operator, reader, other (an operator of tenant "globex")
    db_url: str

    def url(self, path: str) -> str:
        return f"{self.base}/console{path}"

    async def start(self, workflow: str, who: str = "operator") -> str:
        """Start a run over MCP (tools/call start_<workflow>) as `who`; its execution id."""
        async with httpx.AsyncClient() as http:
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": f"start_{workflow}", "arguments": {"body": {}}},
            }
            headers = {
                "Authorization": f"Bearer {self.tokens[who]}",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-11-25",
            }
            reply = await http.post(f"{self.base}/mcp", json=body, headers=headers)
            reply.raise_for_status()
            result = reply.json()["result"]
            assert not result.get("isError"), result
            return str(result["structuredContent"]["execution_id"])

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


async def _row(site: Site, run_id: str) -> asyncpg.Record:
    conn = await asyncpg.connect(site.db_url)
    try:
        row = await conn.fetchrow("SELECT status, output FROM executions WHERE id = $1", run_id)
    finally:
        await conn.close()
    assert row is not None
    return row


@contextlib.asynccontextmanager
async def console_site(db_url: str) -> AsyncIterator[Site]:
    tokens: dict[str, str] = {}
    entries = []
    for name, role, tenant in (
        ("operator", "operator", None),
        ("reader", "reader", None),
        ("other", "operator", "globex"),
    ):
        token, entry = new_token(name, role, tenant)
        tokens[name] = token
        entries.append(entry)
    async with serve(app, db_url, console=True, api_tokens=",".join(entries)) as mcp_url:
        yield Site(mcp_url.removesuffix("/mcp"), tokens, db_url)


@pytest.fixture
async def site(db_url: str) -> AsyncIterator[Site]:
    async with console_site(db_url) as s:
        yield s
