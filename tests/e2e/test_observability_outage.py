"""/readyz while the database is down: not ready (503 naming the failing checks), then ready
again by itself once the server is back. A throwaway embedded PostgreSQL stopped with pg_ctl
(reliability/cluster.py), so the session's shared server is never touched."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from reliability.cluster import Postgres

from tests.e2e.conftest import serve
from tether.runtime.registry import App
from tether.runtime.service import migrate_database

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.timeout(180)]


@pytest.fixture
def own_postgres() -> Iterator[Postgres]:
    pg = Postgres()
    if not pg.controllable:
        pytest.skip(pg.why_not_controllable)
    try:
        yield pg
    finally:
        pg.close()


async def readyz(http: httpx.AsyncClient, base: str) -> httpx.Response:
    return await http.get(f"{base}/readyz")


async def until_status(http: httpx.AsyncClient, base: str, status: int) -> httpx.Response:
    """Probe until /readyz answers `status` (as a kubelet would; bounded)."""
    async with asyncio.timeout(60):
        while True:
            resp = await readyz(http, base)
            if resp.status_code == status:
                return resp
            await asyncio.sleep(0.1)


async def test_readyz_is_not_ready_while_the_database_is_down_and_recovers(
    own_postgres: Postgres,
) -> None:
    """Database down → 503 with database false; back up → 200, no restart."""
    db_url = own_postgres.uri  # its own server: its default database is this test's
    await migrate_database(db_url)
    async with serve(App("outage"), db_url) as url, httpx.AsyncClient(timeout=10) as http:
        base = url.removesuffix("/mcp")
        ok = await until_status(http, base, 200)
        assert ok.json()["checks"] == {
            "database": True,
            "migrations": True,
            "listener": True,
            "workers": True,
        }
        socket_dir = await asyncio.to_thread(own_postgres.stop)
        try:
            down = await until_status(http, base, 503)
            assert down.json()["status"] == "not ready"
            assert down.json()["checks"]["database"] is False
        finally:
            await asyncio.to_thread(own_postgres.start, socket_dir)
        back = await until_status(http, base, 200)
        assert back.json() == {
            "status": "ready",
            "checks": {"database": True, "migrations": True, "listener": True, "workers": True},
        }
