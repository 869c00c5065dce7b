"""McpShortcut: a request for exactly the MCP path reaches its route without Starlette's
exception middleware and router, with what a match puts in the scope; anything else goes on."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.routing import Route, Router

from tether.mcp.route import McpShortcut


class Recorder:
    def __init__(self, name: str) -> None:
        self.name = name
        self.scopes: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.scopes.append(dict(scope))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": self.name.encode()})


def _scope(path: str, root_path: str = "") -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": path, "root_path": root_path,
            "headers": [], "query_string": b""}  # fmt: skip


async def _call(app: Any, scope: dict[str, Any]) -> bytes:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


async def test_the_mcp_path_goes_straight_to_its_route_and_the_rest_goes_on() -> None:
    mcp, other = Recorder("mcp"), Recorder("other")
    route = Route("/mcp", mcp)
    router = Router([Route("/other", other), route])
    shortcut = McpShortcut(router, route=route)
    assert await _call(shortcut, _scope("/mcp")) == b"mcp"
    seen = mcp.scopes[-1]
    assert seen["route"] is route and seen["endpoint"] is mcp and seen["path_params"] == {}
    assert "router" not in seen  # the router never saw it
    assert await _call(shortcut, _scope("/other")) == b"other"
    assert await _call(shortcut, _scope("/mcp/")) != b"mcp"  # not exactly the path: routed
    assert await _call(shortcut, _scope("/nowhere")) == b"Not Found"
    # with a root path the router decides (here: /api/mcp is the MCP route's path)
    assert await _call(shortcut, _scope("/api/mcp", root_path="/api")) == b"mcp"
    assert mcp.scopes[-1]["router"] is router
    assert len(mcp.scopes) == 2


def test_only_a_fixed_every_method_route_can_be_the_shortcut() -> None:
    router = Router([])
    with pytest.raises(ValueError, match="shortcut"):
        McpShortcut(router, route=Route("/runs/{id}", Recorder("x")))
    with pytest.raises(ValueError, match="shortcut"):
        McpShortcut(router, route=Route("/mcp", Recorder("x"), methods=["GET"]))
