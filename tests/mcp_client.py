"""A raw MCP 2026-07-28 client for tests: every header and `_meta` key under the test's
control, so tests can send both well-formed and deliberately broken requests."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Collection, Mapping
from typing import Any

import httpx
import orjson

VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
NAME_FIELDS = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
CAPS_TASKS: dict[str, Any] = {"elicitation": {}, "extensions": {TASKS: {}}}


def meta(capabilities: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": CAPS_TASKS
        if capabilities is None
        else capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "tether-tests", "version": "0"},
        **extra,
    }


class McpClient:
    def __init__(self, url: str, *, timeout: float = 30.0) -> None:
        self.url = url
        self.http = httpx.AsyncClient(timeout=timeout)
        self._ids = itertools.count(1)

    async def aclose(self) -> None:
        await self.http.aclose()

    def headers(self, method: str, params: dict[str, Any]) -> dict[str, str]:
        h = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": method,
        }
        field = NAME_FIELDS.get(method)
        if field and isinstance(params.get(field), str):
            h["Mcp-Name"] = params[field]
        return h

    async def post(self, body: Any, headers: dict[str, str]) -> httpx.Response:
        raw = body if isinstance(body, bytes) else orjson.dumps(body)
        return await self.http.post(self.url, content=raw, headers=headers)

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        capabilities: dict[str, Any] | None = None,
        headers: Mapping[str, str | None] | None = None,
    ) -> httpx.Response:
        """Send a well-formed request; `headers` overrides (None removes a header)."""
        p = dict(params or {})
        p.setdefault("_meta", meta(capabilities))
        h: dict[str, str] = self.headers(method, p)
        for k, v in (headers or {}).items():
            h.pop(k, None)
            for existing in [x for x in h if x.lower() == k.lower()]:
                h.pop(existing)
            if v is not None:
                h[k] = v
        return await self.post(
            {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": p}, h
        )

    async def call(
        self, method: str, params: dict[str, Any] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """The JSON-RPC response body (result or error) of a request."""
        resp = await self.request(method, params, **kwargs)
        body: dict[str, Any] = resp.json()
        return body

    async def result(
        self, method: str, params: dict[str, Any] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        body = await self.call(method, params, **kwargs)
        assert "result" in body, body
        result: dict[str, Any] = body["result"]
        return result

    async def wait_task(
        self, task_id: str, statuses: Collection[str], *, timeout: float = 10.0, **kwargs: Any
    ) -> dict[str, Any]:
        """Poll tasks/get until the task reaches one of `statuses` (polling is the protocol);
        bounded by `timeout`."""
        async with asyncio.timeout(timeout):
            while True:
                task = await self.result("tasks/get", {"taskId": task_id}, **kwargs)
                if task["status"] in statuses:
                    return task
                await asyncio.sleep(0.02)
