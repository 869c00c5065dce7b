"""The MCP path's route, and the app's router, which tries that route first.

`McpRoute` serves the endpoint the lifespan publishes on `app.state.endpoint` (503 until
start-up completes; every method: the endpoint answers 405 itself). `McpFirstRouter` is
Starlette's Router with one shortcut: a request for exactly the MCP path goes to that route
without matching the route patterns one by one (each a regex; the security middleware around
the router has already run, so nothing is skipped but the lookup). It sets what a match sets
(`router`, `route`, `endpoint`, `path_params`). Every other request — and every use of the
route list: enumeration, `url_path_for`, lifespan — is Starlette's own.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response
from starlette.routing import BaseRoute, Route, Router
from starlette.types import Receive, Scope, Send

from tether.jsonrpc import codec
from tether.jsonrpc.errors import Unavailable
from tether.jsonrpc.http import McpEndpoint


class McpRoute:
    """The MCP path as a plain ASGI app (Starlette routes a non-function endpoint to it as
    is, for every method: the endpoint answers 405 itself)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint: McpEndpoint | None = getattr(scope["app"].state, "endpoint", None)
        if endpoint is None:  # fail closed until start-up completes
            body = codec.encode_error(None, Unavailable("server is starting"))
            await Response(body, status_code=503, media_type="application/json")(
                scope, receive, send
            )
            return
        await endpoint(scope, receive, send)


class McpFirstRouter(Router):
    """Starlette's router over `routes`, where a request for exactly `first`'s path (an HTTP
    request with no root path) reaches it without the route-by-route match."""

    def __init__(self, first: Route, routes: list[BaseRoute], **kwargs: Any) -> None:
        if first not in routes or "{" in first.path or first.methods is not None:
            raise ValueError("the first route must be one of the routes, fixed, every method")
        super().__init__(routes, **kwargs)
        self.first = first

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        first = self.first
        if scope["type"] == "http" and scope["path"] == first.path and not scope.get("root_path"):
            scope["router"] = self
            scope["route"] = first
            scope["endpoint"] = first.endpoint
            scope["path_params"] = {}
            await first.app(scope, receive, send)
            return
        await super().app(scope, receive, send)
