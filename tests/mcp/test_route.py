"""McpFirstRouter: a request for exactly the MCP path reaches its route without the
route-by-route match, with what a match puts in the scope; anything else is Starlette's."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.routing import BaseRoute, Route

from tether.mcp.route import McpFirstRouter


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


async def _call(router: McpFirstRouter, scope: dict[str, Any]) -> bytes:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    await router(scope, receive, send)
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


async def test_the_mcp_path_goes_straight_to_its_route_and_the_rest_is_matched() -> None:
    mcp, other = Recorder("mcp"), Recorder("other")
    first = Route("/mcp", mcp)
    routes: list[BaseRoute] = [Route("/other", other), first]  # listed second: reached first
    router = McpFirstRouter(first, routes)
    assert await _call(router, _scope("/mcp")) == b"mcp"
    seen = mcp.scopes[-1]
    assert seen["route"] is first and seen["endpoint"] is mcp and seen["path_params"] == {}
    assert seen["router"] is router
    assert await _call(router, _scope("/other")) == b"other"
    assert await _call(router, _scope("/mcp/")) != b"mcp"  # not exactly the path: matched
    assert await _call(router, _scope("/nowhere")) == b"Not Found"
    # with a root path the plain match decides (here: /api/mcp is the MCP route's path)
    assert await _call(router, _scope("/api/mcp", root_path="/api")) == b"mcp"
    assert len(mcp.scopes) == 2


def test_only_a_fixed_every_method_route_of_the_list_can_go_first() -> None:
    listed = Route("/mcp", Recorder("mcp"))
    with pytest.raises(ValueError, match="first route"):
        McpFirstRouter(Route("/mcp", Recorder("x")), [listed])  # not in the list
    with pytest.raises(ValueError, match="first route"):
        McpFirstRouter(pinned := Route("/runs/{id}", Recorder("x")), [pinned])
    with pytest.raises(ValueError, match="first route"):
        McpFirstRouter(get := Route("/mcp", Recorder("x"), methods=["GET"]), [get])
