"""The MCP path's route, and a shortcut to it.

`McpRoute` serves the endpoint the lifespan publishes on `app.state.endpoint` (503 until
start-up completes; every method: the endpoint answers 405 itself). `McpShortcut` is a
middleware just inside the security layer (which has run by then: nothing is skipped but the
lookup): a request for exactly the MCP path goes to that route without Starlette's exception
middleware and router, which would build a Request, wrap `send` and match the route patterns
one by one (each a regex) — a few µs of every tasks/get poll. The MCP endpoint raises no
HTTPException for the exception middleware to answer: anything it raises still reaches the
server-error middleware outside. Every other request — and every use of the route list:
enumeration, `url_path_for`, lifespan — is Starlette's own.
"""

from __future__ import annotations

from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

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


class McpShortcut:
    """A middleware under the security layer: a request for exactly `route`'s path (HTTP, no
    root path) goes straight to the route's app, with what a match puts in the scope
    (`route`, `endpoint`, `path_params`); anything else goes on to `app` (Starlette's
    exception middleware and router)."""

    def __init__(self, app: ASGIApp, *, route: Route) -> None:
        if "{" in route.path or route.methods is not None:
            raise ValueError("the shortcut needs a route with a fixed path, for every method")
        self.app = app
        self.route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.route
        if scope["type"] == "http" and scope["path"] == route.path and not scope.get("root_path"):
            scope["route"] = route
            scope["endpoint"] = route.endpoint
            scope["path_params"] = {}
            await route.app(scope, receive, send)
            return
        await self.app(scope, receive, send)
