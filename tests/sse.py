"""A raw SSE reader for tests: POST a request, read `event: message` frames as JSON-RPC
messages, each read bounded by a timeout."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

from tests.mcp_client import McpClient, meta


class Stream:
    """The messages of one SSE response, in order."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.aiter_lines()

    async def next(self, timeout: float = 10.0) -> dict[str, Any]:
        """The next JSON-RPC message; TimeoutError when none comes in time."""
        async with asyncio.timeout(timeout):
            data: list[str] = []
            async for line in self._lines:
                if line.startswith("data:"):
                    data.append(line[5:].strip())
                elif not line and data:
                    message: dict[str, Any] = orjson.loads("\n".join(data))
                    return message
        raise EOFError("the stream ended")

    async def rest(self, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Every message until the stream ends."""
        out = []
        with contextlib.suppress(EOFError):
            while True:
                out.append(await self.next(timeout))
        return out


@contextlib.asynccontextmanager
async def listen(
    client: McpClient,
    notifications: dict[str, Any],
    *,
    request_id: int = 40,
    capabilities: dict[str, Any] | None = None,
) -> AsyncIterator[Stream]:
    """Open `subscriptions/listen` and yield its stream (the response must be SSE)."""
    params = {"notifications": notifications, "_meta": meta(capabilities)}
    body = {"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen", "params": params}
    headers = client.headers("subscriptions/listen", params)
    async with client.http.stream(
        "POST", client.url, content=orjson.dumps(body), headers=headers
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream"), (
            response.status_code,
            await response.aread(),
        )
        yield Stream(response)
