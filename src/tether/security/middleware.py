"""The security layer: a plain ASGI middleware around the whole app (as Starlette keeps
TrustedHostMiddleware and CORS apart from routing), so every route — `/mcp`, `/healthz`, and
whatever comes next — passes the same checks before any handler runs:

1. Host and Origin (hosts.HostPolicy) → 403, a JSON-RPC Unauthorized error without an id;
2. authentication (tokens.Authenticator) → 401 with a Bearer challenge, a JSON-RPC
   Unauthenticated error without an id;
3. the body cap, `max_body_bytes`, for every route that reads a body (the MCP endpoint, the
   console's forms, and whatever comes next) → 413: a declared `Content-Length` over the cap
   at once, before any handler runs; a body sent without a length (chunked) as soon as the
   bytes the handler has read cross the cap (the read fails, so the handler acts on nothing);
4. the caller's request rate (limits.RateLimiter, per token, or per remote address for callers
   without one) → 429 with `Retry-After` and a JSON-RPC RateLimited error;
5. the principal goes into the ASGI scope under `PRINCIPAL_KEY` (Starlette's `user`), where
   handlers read it; they never look at these headers again.

Probe paths (`/healthz`) pass the same Host/Origin check, but a caller without a valid token
gets through as the anonymous principal: Kubernetes probes carry no token. Such routes must
answer an anonymous caller with nothing worth protecting (the health route then says only
whether the server is up). Paths under `session_prefix` (the console, which signs in with a
cookie of its own and checks it itself) are let through the same way without a token.

Headers are read once, straight from the scope (no Request object: this is on the tasks/get
hot path). Lifespan events pass through untouched.
"""

from __future__ import annotations

import time
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tether.jsonrpc import codec
from tether.jsonrpc.errors import JsonRpcError, RateLimited, Unauthenticated, Unauthorized
from tether.jsonrpc.http import PRINCIPAL_KEY, Reply
from tether.principal import Principal
from tether.security.hosts import HostPolicy
from tether.security.limits import RateLimiter, caller_key, retry_after
from tether.security.tokens import ANONYMOUS, DEV, Authenticator

_JSON = (b"content-type", b"application/json")
_CHALLENGE = (b"www-authenticate", b'Bearer realm="tether"')
#: The headers this layer reads, by their slot (one dict lookup per header of a request).
_READ: Final = {b"host": 0, b"origin": 1, b"authorization": 2, b"content-length": 3}
_POLICY_VIOLATION = 1008  # WebSocket close code: the request violates the server's policy


def _refusal(error: JsonRpcError, *extra: tuple[bytes, bytes]) -> Reply:
    return Reply(error.http_status, codec.encode_error(None, error), (_JSON, *extra))


class BodyTooLarge(Exception):
    """The request body crossed the body cap while the handler read it."""


class SecurityMiddleware:
    """Host/Origin policy and authentication for every HTTP (and WebSocket) request."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: HostPolicy,
        authenticator: Authenticator,
        probes: frozenset[str] = frozenset(),
        max_body_bytes: int | None = None,
        limiter: RateLimiter | None = None,
        session_prefix: str | None = None,
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.authenticator = authenticator
        self.probes = probes
        self.max_body_bytes = max_body_bytes
        self.limiter = limiter
        self.session_prefix = session_prefix
        self._forbidden = _refusal(Unauthorized("Origin or Host not allowed"))
        self._too_large = Reply(413)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        found: list[bytes | None] = [None, None, None, None]  # by _READ's slots; the last wins
        for raw_name, value in scope["headers"]:
            if raw_name in _READ:
                found[_READ[raw_name]] = value
            elif not raw_name.islower():  # ASGI servers send lower case; anyone else is heard
                slot = _READ.get(raw_name.lower())
                if slot is not None:
                    found[slot] = value
        raw_host, raw_origin, raw_authorization, length = found
        host = None if raw_host is None else raw_host.decode("latin-1")
        origin = None if raw_origin is None else raw_origin.decode("latin-1")
        authorization = None if raw_authorization is None else raw_authorization.decode("latin-1")
        refusal: Reply | None = None
        if not self.hosts.allows(host, origin):
            refusal = self._forbidden
        else:
            try:
                principal = self.authenticator.principal(authorization)
            except Unauthenticated as exc:
                if self._anonymous_allowed(scope.get("path") or ""):
                    principal = ANONYMOUS
                else:
                    refusal = _refusal(exc, _CHALLENGE)
            if refusal is None:
                scope[PRINCIPAL_KEY] = principal
                refusal = self._limits(scope, principal, length)
        if refusal is None:
            if length is None and self.max_body_bytes is not None and scope["type"] == "http":
                await self._capped(scope, receive, send, self.max_body_bytes)
            else:
                # A declared length is within the cap (checked above), and the server reads
                # exactly that many bytes: nothing to count.
                await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": _POLICY_VIOLATION})
        else:
            await refusal(scope, receive, send)

    async def _capped(self, scope: Scope, receive: Receive, send: Send, cap: int) -> None:
        """Run the app on a body without a declared length, counting what it reads: the
        read that crosses `cap` raises BodyTooLarge in the handler, and the caller gets 413
        (unless the handler had already started its response: then the request just ends)."""
        read = 0
        crossed = False
        started = False

        async def counted() -> Message:
            nonlocal read, crossed
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > cap:
                    crossed = True
                    raise BodyTooLarge()
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except (BodyTooLarge, ExceptionGroup):
            # A handler reading in a task group (a stream watching for the disconnect) gets
            # BodyTooLarge inside a group: the refusal is the same.
            if not crossed:
                raise
            if not started:
                await self._too_large(scope, receive, send)

    def _anonymous_allowed(self, path: str) -> bool:
        """Whether a caller without a valid token gets through as the anonymous principal."""
        if path in self.probes:
            return True
        prefix = self.session_prefix
        return prefix is not None and (path == prefix or path.startswith(prefix + "/"))

    def _limits(self, scope: Scope, principal: Principal, length: bytes | None) -> Reply | None:
        """The refusal of a request over the body cap or the caller's rate, if it is one."""
        if self.max_body_bytes is not None and length is not None:
            try:
                if int(length) > self.max_body_bytes:
                    return self._too_large
            except ValueError:
                return self._too_large  # the server refuses it too; never let it through
        if self.limiter is None:
            return None
        client = scope.get("client")
        anonymous = principal is ANONYMOUS or principal is DEV
        key = caller_key(principal.name, anonymous, client[0] if client else None)
        wait = self.limiter.take(key, time.monotonic())
        if wait <= 0.0:
            return None
        error = RateLimited("too many requests", data={"retryAfter": wait})
        return _refusal(error, (b"retry-after", retry_after(wait).encode()))
