"""Client fixtures: a real Tether server on loopback (its workers run every run), and a client
connected to it over either transport: the database the server uses, or its MCP endpoint."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.apps.client import app
from tests.e2e.conftest import serve
from tether.client import Client, connect


@pytest.fixture(params=["database", "http"])
async def connected(request: pytest.FixtureRequest, db_url: str) -> AsyncIterator[Client]:
    """A client of a running server, over the database or over HTTP."""
    async with serve(app, db_url) as url:
        target = db_url if request.param == "database" else url
        async with connect(target, app=app) as client:
            assert client.transport == request.param
            yield client
