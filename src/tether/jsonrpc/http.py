"""The Streamable HTTP endpoint: bytes in → checks → ladder → router → bytes out.

A plain ASGI app (no Request/Response objects on the hot path: headers are read once from the
scope, the body straight from `receive`). Statuses come from the error (codes.http_status).
Responses are application/json, or an SSE stream scoped to the request when its handler
streams and the client accepts it.

Host/Origin policy and authentication are not here: a middleware around the whole app applies
them to every route and leaves the principal in the scope (`PRINCIPAL_KEY`), where this
endpoint reads it for the handlers. Every header rule is in the ladder (headers.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, Final, Protocol

from starlette.responses import StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from tether.jsonrpc import codec, codes, headers
from tether.jsonrpc.errors import InvalidMeta, JsonRpcError
from tether.jsonrpc.router import RequestContext, Router
from tether.principal import Principal

logger = logging.getLogger(__name__)

#: The ASGI scope key under which an authentication middleware leaves the request's principal
#: (a `tether.principal.Principal`; Starlette's convention: `scope["user"]`, `request.user`).
PRINCIPAL_KEY: Final = "user"

# Decides whether the principal may call the method (raises a JsonRpcError to refuse).
Authorize = Callable[[RequestContext], None]
ResultHook = Callable[[RequestContext, dict[str, Any]], None]
# Told of every request that was refused or failed with a JSON-RPC error (after authorize).
ErrorHook = Callable[[RequestContext, JsonRpcError], None]
# Takes a stream slot for the request before it may stream: returns the function that gives
# the slot back, or raises a JsonRpcError to refuse (too many open streams).
OpenStream = Callable[[RequestContext], Callable[[], None]]


class Observation(Protocol):
    """One request being observed (metrics, a trace span): entered around its handling,
    told how it ended exactly once (`result` or `error`), possibly after the block when the
    answer streams."""

    def __enter__(self) -> Observation: ...

    def __exit__(self, *exc: object) -> None: ...

    def result(self, result: dict[str, Any]) -> None: ...

    def error(self, error: JsonRpcError) -> None: ...


# Starts observing a request (None: this one is not observed).
Observe = Callable[[RequestContext], Observation | None]
# Told +1 when an SSE response stream opens and -1 when it closes.
StreamHook = Callable[[int], None]

_JSON_HEADER = (b"content-type", headers.JSON.encode())
#: Frames a stream holds for a client that is slow to read before notify() waits.
STREAM_QUEUE_FRAMES: Final = 64
#: A body at least this large is handled over two turns of the event loop: decoding it is
#: one (0.4 ms for a MiB of text in a string; far longer for a MiB of small values), and
#: what the request does next waits for another, so that other requests that became ready
#: meanwhile are not held for both.
LARGE_BODY_BYTES: Final = 64 * 1024


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
    return _json(codec.encode_error(request_id, error), error.http_status)


def _wants_notifications(ctx: RequestContext) -> bool:
    """Stream only when the request can receive notifications: a progress token, or a log
    level (without one the server must not send notifications/message)."""
    meta = ctx.params.get("_meta")
    return ctx.progress_token is not None or (
        isinstance(meta, dict) and isinstance(meta.get(codes.META_LOG_LEVEL), str)
    )


#: Header names as header_map spells them, by their raw bytes: a client sends the same few
#: names on every request, so each costs a lookup instead of a decode and a lower-casing. At
#: most `_NAMES_KEPT` are kept (invented names are spelled out each time, never stored).
_NAMES: dict[bytes, str] = {}
_NAMES_KEPT: Final = 256


def _name(raw: bytes) -> str:
    name = raw.decode("latin-1").lower()
    if len(_NAMES) < _NAMES_KEPT:
        _NAMES[raw] = name
    return name


def header_map(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name (a repeated header: its last value)."""
    known = _NAMES.get
    return {known(k) or _name(k): v.decode("latin-1") for k, v in scope["headers"]}


def _guarded(response: ASGIApp, release: Callable[[], None], task: asyncio.Task[None]) -> ASGIApp:
    """`response`, then the stream slot given back and the request's task ended however the
    stream ends — even when the client left before the first event (the event generator then
    never starts, so its own cleanup never runs)."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await response(scope, receive, send)
        finally:
            release()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    return guarded


def _context(
    hdrs: dict[str, str],
    body: bytes,
    param_schema: headers.ParamSchema | None,
    principal: Principal | None,
    remote: str | None,
) -> tuple[RequestContext, codec.Message] | Reply:
    """The request's context and message, or the error reply to a body that is not a valid
    request (decoding, then the header ladder). Plain code: no coroutine frame of its own."""
    try:
        msg = codec.decode(body)
    except codec.DecodeError as exc:
        return _error(exc.request_id, exc.error)
    try:
        route = headers.check(msg, hdrs, param_schema)
        if msg.has_params and not isinstance(msg.params, dict):
            raise InvalidMeta("params must be an object")
    except JsonRpcError as exc:
        return _error(None if msg.is_notification else msg.id, exc)
    ctx = RequestContext(
        method=msg.method,
        params=msg.params if isinstance(msg.params, dict) else {},
        route=route,
        headers=hdrs,
        request_id=msg.id,
        principal=principal,
        remote=remote,
    )
    return ctx, msg


def _nothing() -> None:
    """A stream slot that was never limited."""


class _Disconnected(Exception):
    """The client went away before its body arrived."""


class McpEndpoint:
    """An ASGI endpoint for one JSON-RPC router."""

    def __init__(
        self,
        router: Router,
        *,
        max_body_bytes: int = 1024 * 1024,
        param_schema: headers.ParamSchema | None = None,
        authorize: Authorize | None = None,
        on_result: ResultHook | None = None,
        on_error: ErrorHook | None = None,
        open_stream: OpenStream | None = None,
        observe: Observe | None = None,
        on_stream: StreamHook | None = None,
    ) -> None:
        self.router = router
        self.max_body_bytes = max_body_bytes
        self.param_schema = param_schema
        self.authorize = authorize
        self.on_result = on_result
        self.on_error = on_error
        self.open_stream = open_stream
        self.observe = observe
        self.on_stream = on_stream

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
        if not headers.is_json(hdrs):
            return Reply(415, b"", ((b"accept", headers.JSON.encode()),))
        if headers.declared_length_over(hdrs, self.max_body_bytes):
            return Reply(413)
        body = await self._read(receive)
        if body is None:
            return Reply(413)
        client = scope.get("client")
        remote = client[0] if client else None
        parsed = _context(hdrs, body, self.param_schema, scope.get(PRINCIPAL_KEY), remote)
        if isinstance(parsed, Reply):
            return parsed
        if len(body) >= LARGE_BODY_BYTES:
            del body
            await asyncio.sleep(0)
        ctx, msg = parsed
        if msg.is_notification:
            # Notifications we have no use for (e.g. notifications/cancelled on HTTP) are
            # accepted and ignored: the client must not be told to retry them.
            await self.router.deliver(ctx)
            return Reply(202)
        assert msg.id is not None  # noqa: S101 — not a notification
        seen = self.observe(ctx) if self.observe is not None else None
        if seen is None:
            return await self._call(ctx, msg.id, hdrs, None)
        with seen:
            return await self._call(ctx, msg.id, hdrs, seen)

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

    async def _call(
        self,
        ctx: RequestContext,
        request_id: codec.RequestId,
        hdrs: dict[str, str],
        seen: Observation | None,
    ) -> ASGIApp:
        try:
            if self.authorize is not None:
                self.authorize(ctx)
            if (
                self.router.streams(ctx.method)
                and headers.accepts_sse(hdrs)
                and (self.router.always_streams(ctx.method) or _wants_notifications(ctx))
            ):
                self.router.resolve(ctx.method, ctx.route.era)
                release = self.open_stream(ctx) if self.open_stream is not None else _nothing
                return await self._stream(ctx, request_id, release, seen)
            result = await self.router.dispatch(ctx)
        except JsonRpcError as exc:
            self._failed(ctx, seen, exc)
            return _error(request_id, exc)
        self._answered(ctx, seen, result)
        return _json(codec.encode_result(request_id, result))

    def _answered(
        self, ctx: RequestContext, seen: Observation | None, result: dict[str, Any]
    ) -> None:
        if self.on_result is not None:
            self.on_result(ctx, result)
        if seen is not None:
            seen.result(result)

    def _failed(self, ctx: RequestContext, seen: Observation | None, exc: JsonRpcError) -> None:
        if self.on_error is not None:
            self.on_error(ctx, exc)
        if seen is not None:
            seen.error(exc)

    async def _stream(
        self,
        ctx: RequestContext,
        request_id: codec.RequestId,
        release: Callable[[], None],
        seen: Observation | None = None,
    ) -> ASGIApp:
        """SSE scoped to the request — chosen only once the handler has sent a notification.
        A handler that answers (or fails) before notifying gets a plain JSON response, so
        its error keeps its HTTP status (a 400 is not hidden inside a 200 stream)."""
        # (final, body, status). Bounded: a handler whose client stops reading blocks in
        # notify() instead of buffering without bound (a listen stream then drops it).
        queue: asyncio.Queue[tuple[bool, bytes, int]] = asyncio.Queue(STREAM_QUEUE_FRAMES)

        async def notify(method: str, params: dict[str, Any]) -> None:
            await queue.put((False, codec.encode_notification(method, params), 200))

        ctx.notify = notify
        ctx.streaming = True

        async def run() -> None:
            try:
                result = await self.router.dispatch(ctx)
                self._answered(ctx, seen, result)
                await queue.put((True, codec.encode_result(request_id, result), 200))
            except JsonRpcError as exc:
                self._failed(ctx, seen, exc)
                await queue.put((True, codec.encode_error(request_id, exc), exc.http_status))

        task = asyncio.create_task(run())
        try:
            final, body, status = await queue.get()
        except BaseException:
            release()
            task.cancel()
            raise
        if final:
            release()
            await task
            return _json(body, status)

        response = StreamingResponse(
            _events(body, queue, task, self.on_stream),
            media_type=headers.SSE,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        return _guarded(response, release, task)


async def _events(
    first: bytes,
    queue: asyncio.Queue[tuple[bool, bytes, int]],
    task: asyncio.Task[None],
    on_stream: StreamHook | None,
) -> AsyncIterator[bytes]:
    """The SSE body: the first frame, then each queued one until the final answer. The client
    closing the stream cancels the request (Streamable HTTP)."""
    if on_stream is not None:
        on_stream(1)
    try:
        yield b"event: message\ndata: " + first + b"\n\n"
        while True:
            done, item, _ = await queue.get()
            yield b"event: message\ndata: " + item + b"\n\n"
            if done:
                return
    finally:
        if on_stream is not None:
            on_stream(-1)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
