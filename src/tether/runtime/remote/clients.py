"""The process's one HTTP client for remote calls.

Its own module, below both the remote configuration (which holds the clients) and the transport
(which sends on them), so neither imports the other to reach it.
"""

from __future__ import annotations

import asyncio
from typing import Final

import httpx

CONNECT_TIMEOUT_S: Final = 10.0


class Clients:
    """The process's HTTP client for remote calls (one connection pool), made on first use in
    the running event loop; `aclose` closes it (the runtime does, when it stops)."""

    def __init__(self) -> None:
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client.is_closed or self._loop is not loop:
            self._client = httpx.AsyncClient(
                limits=httpx.Limits(max_connections=100, max_keepalive_connections=50),
                timeout=httpx.Timeout(30.0, connect=CONNECT_TIMEOUT_S),
                follow_redirects=False,
            )
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        client, self._client, self._loop = self._client, None, None
        if client is not None and not client.is_closed:
            await client.aclose()
