"""The Streamable HTTP endpoint: bytes in → checks → ladder → router → bytes out.

A plain ASGI app (no Request/Response objects on the hot path: headers are read once from the
scope, the body straight from `receive`). Statuses come from the error (codes.HTTP_STATUS).
Responses are application/json, or an SSE stream scoped to the request when its handler
streams and the client accepts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from starlette.responses import StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from tether.jsonrpc import codec, codes, headers
from tether.jsonrpc.errors import InvalidMeta, JsonRpcError, Unauthorized
from tether.jsonrpc.router import RequestContext, Router

logger = logging.getLogger(__name__)

JSON = "application/json"
SSE = "text/event-stream"
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})

# Returns a principal or raises Unauthenticated; gets the request's headers (lower-case names).
Authenticate = Callable[[Mapping[str, str]], Awaitable[Any]]
Authorize = Callable[[RequestContext], None]  # raises a JsonRpcError to refuse the request
ResultHook = Callable[[RequestContext, dict[str, Any]], None]

_JSON_HEADER = (b"content-type", JSON.encode())


class Reply:
    """A complete, non-streamed HTTP response (an ASGI app)."""

    __slots__ = ("body", "headers", "status")

    def __init__(
        self, status: int, body: bytes = b"", headers: tuple[tuple[bytes, bytes], ...] = ()
    ) -> None:
        self.status = status
        self.body = body
        self.headers = headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        head = [(b"content-length", str(len(self.body)).encode()), *self.headers]
        await send({"type": "http.response.start", "status": self.status, "headers": head})
        await send({"type": "http.response.body", "body": self.body})


def _json(body: bytes, status: int = 200) -> Reply:
    return Reply(status, body, (_JSON_HEADER,))


def _error(request_id: codec.RequestId | None, error: JsonRpcError) -> Reply:
    response = _json(codec.encode_error(request_id, error), error.http_status)
    if error.http_status == 401:
        response.headers += ((b"www-authenticate", b'Bearer realm="tether"'),)
    return response


def _hostname(value: str) -> str:
    if value.startswith("["):
        return value.split("]")[0] + "]"
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _wants_notifications(ctx: RequestContext) -> bool:
    """Stream only when the request can receive notifications: a progress token, or a log
    level (without one the server must not send notifications/message)."""
    meta = ctx.params.get("_meta")
    return ctx.progress_token is not None or (
        isinstance(meta, dict) and isinstance(meta.get(codes.META_LOG_LEVEL), str)
    )


def header_map(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name (a repeated header: its last value)."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


class _Disconnected(Exception):
    """The client went away before its body arrived."""


class McpEndpoint:
    """An ASGI endpoint for one JSON-RPC router."""

    def __init__(
        self,
        router: Router,
        *,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        max_body_bytes: int = 4 * 1024 * 1024,
        authenticate: Authenticate | None = None,
        authorize: Authorize | None = None,
        on_result: ResultHook | None = None,
    ) -> None:
        self.router = router
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts) | LOOPBACK_HOSTS
        self.allowed_origins = frozenset(o.lower().rstrip("/") for o in allowed_origins)
        self.max_body_bytes = max_body_bytes
        self.authenticate = authenticate
        self.authorize = authorize
        self.on_result = on_result

    # --- transport checks ---------------------------------------------------------------------

    def _host_allowed(self, hdrs: Mapping[str, str]) -> bool:
        if "*" in self.allowed_hosts:
            return True
        host = hdrs.get("host")
        return host is None or _hostname(host.lower()) in self.allowed_hosts

    def _origin_allowed(self, hdrs: Mapping[str, str]) -> bool:
        origin = hdrs.get("origin")
        if origin is None:
            return True  # not a browser
        origin = origin.lower().rstrip("/")
        if origin in self.allowed_origins or "*" in self.allowed_origins:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and (parts.hostname or "") in {
            h.strip("[]") for h in self.allowed_hosts
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            response = await self.respond(scope, receive)
        except _Disconnected:
            return  # nobody to answer
        await response(scope, receive, send)

    async def respond(self, scope: Scope, receive: Receive) -> ASGIApp:
        """The response to one HTTP request (not yet sent)."""
        if scope["method"] != "POST":
            return Reply(405, b"", ((b"allow", b"POST"),))
        hdrs = header_map(scope)
        if not self._host_allowed(hdrs) or not self._origin_allowed(hdrs):
            return _json(codec.encode_error(None, Unauthorized("Origin or Host not allowed")), 403)
        content_type = hdrs.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != JSON:
            return Reply(415, b"", ((b"accept", JSON.encode()),))
        declared = hdrs.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            return Reply(413)
        body = await self._read(receive)
        if body is None:
            return Reply(413)
        return await self._serve(hdrs, body)

    async def _read(self, receive: Receive) -> bytes | None:
        """The whole body; None when it exceeds max_body_bytes."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)  # one chunk: CPython returns it as is

    # --- JSON-RPC -----------------------------------------------------------------------------

    async def _serve(self, hdrs: dict[str, str], body: bytes) -> ASGIApp:
        try:
            msg = codec.decode(body)
        except codec.DecodeError as exc:
            return _error(exc.request_id, exc.error)
        try:
            route = headers.check(msg, hdrs)
            if msg.has_params and not isinstance(msg.params, dict):
                raise InvalidMeta("params must be an object")
            principal = await self.authenticate(hdrs) if self.authenticate else None
        except JsonRpcError as exc:
            return _error(None if msg.is_notification else msg.id, exc)
        ctx = RequestContext(
            method=msg.method,
            params=msg.params if isinstance(msg.params, dict) else {},
            route=route,
            headers=hdrs,
            request_id=msg.id,
            principal=principal,
        )
        if msg.is_notification:
            # Notifications we have no use for (e.g. notifications/cancelled on HTTP) are
            # accepted and ignored: the client must not be told to retry them.
            await self.router.deliver(ctx)
            return Reply(202)
        assert msg.id is not None  # noqa: S101 — not a notification
        try:
            if self.authorize is not None:
                self.authorize(ctx)
            if (
                self.router.streams(msg.method)
                and SSE in hdrs.get("accept", "")
                and _wants_notifications(ctx)
            ):
                self.router.resolve(msg.method, route.era)
                return await self._stream(ctx, msg.id)
            result = await self.router.dispatch(ctx)
        except JsonRpcError as exc:
            return _error(msg.id, exc)
        if self.on_result is not None:
            self.on_result(ctx, result)
        return _json(codec.encode_result(msg.id, result))

    async def _stream(self, ctx: RequestContext, request_id: codec.RequestId) -> ASGIApp:
        """SSE scoped to the request — chosen only once the handler has sent a notification.
        A handler that answers (or fails) before notifying gets a plain JSON response, so
        its error keeps its HTTP status (a 400 is not hidden inside a 200 stream)."""
        queue: asyncio.Queue[tuple[bool, bytes, int]] = asyncio.Queue()  # (final, body, status)

        async def notify(method: str, params: dict[str, Any]) -> None:
            await queue.put((False, codec.encode_notification(method, params), 200))

        ctx.notify = notify
        ctx.streaming = True

        async def run() -> None:
            try:
                result = await self.router.dispatch(ctx)
                if self.on_result is not None:
                    self.on_result(ctx, result)
                await queue.put((True, codec.encode_result(request_id, result), 200))
            except JsonRpcError as exc:
                await queue.put((True, codec.encode_error(request_id, exc), exc.http_status))

        task = asyncio.create_task(run())
        final, body, status = await queue.get()
        if final:
            await task
            return _json(body, status)

        async def events() -> AsyncIterator[bytes]:
            try:
                yield b"event: message\ndata: " + body + b"\n\n"
                while True:
                    done, item, _ = await queue.get()
                    yield b"event: message\ndata: " + item + b"\n\n"
                    if done:
                        return
            finally:
                # The client closing the stream cancels the request (Streamable HTTP).
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

        return StreamingResponse(
            events(),
            media_type=SSE,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
