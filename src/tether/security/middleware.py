"""The security layer: a plain ASGI middleware around the whole app (as Starlette keeps
TrustedHostMiddleware and CORS apart from routing), so every route — `/mcp`, `/healthz`, and
whatever comes next — passes the same checks before any handler runs:

1. Host and Origin (hosts.HostPolicy) → 403, a JSON-RPC Unauthorized error without an id;
2. authentication (tokens.Authenticator) → 401 with a Bearer challenge, a JSON-RPC
   Unauthenticated error without an id;
3. the principal goes into the ASGI scope under `PRINCIPAL_KEY` (Starlette's `user`), where
   handlers read it; they never look at these headers again.

Probe paths (`/healthz`) pass the same Host/Origin check, but a caller without a valid token
gets through as the anonymous principal: Kubernetes probes carry no token. Such routes must
answer an anonymous caller with nothing worth protecting (the health route then says only
whether the server is up).

Headers are read once, straight from the scope (no Request object: this is on the tasks/get
hot path). Lifespan events pass through untouched.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from tether.jsonrpc import codec
from tether.jsonrpc.errors import JsonRpcError, Unauthenticated, Unauthorized
from tether.jsonrpc.http import PRINCIPAL_KEY, Reply
from tether.security.hosts import HostPolicy
from tether.security.tokens import ANONYMOUS, Authenticator

_JSON = (b"content-type", b"application/json")
_CHALLENGE = (b"www-authenticate", b'Bearer realm="tether"')
_POLICY_VIOLATION = 1008  # WebSocket close code: the request violates the server's policy


def _refusal(error: JsonRpcError, *extra: tuple[bytes, bytes]) -> Reply:
    return Reply(error.http_status, codec.encode_error(None, error), (_JSON, *extra))


class SecurityMiddleware:
    """Host/Origin policy and authentication for every HTTP (and WebSocket) request."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: HostPolicy,
        authenticator: Authenticator,
        probes: frozenset[str] = frozenset(),
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.authenticator = authenticator
        self.probes = probes
        self._forbidden = _refusal(Unauthorized("Origin or Host not allowed"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = origin = authorization = None
        for raw_name, value in scope["headers"]:
            name = raw_name.lower()
            if name == b"host":
                host = value.decode("latin-1")
            elif name == b"origin":
                origin = value.decode("latin-1")
            elif name == b"authorization":
                authorization = value.decode("latin-1")
        refusal: Reply | None = None
        if not self.hosts.allows(host, origin):
            refusal = self._forbidden
        else:
            try:
                scope[PRINCIPAL_KEY] = self.authenticator.principal(authorization)
            except Unauthenticated as exc:
                if scope.get("path") in self.probes:
                    scope[PRINCIPAL_KEY] = ANONYMOUS
                else:
                    refusal = _refusal(exc, _CHALLENGE)
        if refusal is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": _POLICY_VIOLATION})
        else:
            await refusal(scope, receive, send)
