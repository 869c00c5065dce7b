"""JSON-RPC over MCP's Streamable HTTP, for remote calls: one POST per request, the answer read
as JSON or from the request's SSE stream (`Rpc(mcp=False)`: plain JSON-RPC over HTTP, for
another remote protocol); or, for `subscriptions/listen`, a stream whose messages are read as
they arrive (`Transport.listen`).

Failures are told apart here, once, for every protocol built on it: a transport error (the
request may not have arrived: connect, read or write failed or timed out), HTTP 5xx, 408 and
429 raise `Transient` (worth retrying); any other refusal (HTTP 4xx, a JSON-RPC error, a body
that is not a JSON-RPC response) raises `RemoteProtocolError` with the JSON-RPC code when
there is one. Nothing of httpx escapes (`_TRANSPORT_ERRORS`).

Each request is a client span (`tether.remote <method>`) whose W3C `traceparent` goes to the
remote in the header and in `_meta`, and one sample of `tether_remote_requests_total` and
`tether_remote_request_duration_seconds`. The bearer token is read from the remote's
`token_env` when the request is sent; it is never logged, recorded or put in an error.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import httpx
import orjson
from opentelemetry.trace import SpanKind

from tether import sse
from tether.observability import metrics, tracing
from tether.runtime.remote import spec
from tether.runtime.remote.clients import CONNECT_TIMEOUT_S
from tether.runtime.remote.errors import RemoteError, RemoteProtocolError, Transient
from tether.runtime.remote.headers import header_value
from tether.runtime.remote.tool_lists import ToolLists

if TYPE_CHECKING:
    from tether.runtime.remote.config import Remote

#: The largest response body read from a remote (a bigger one is refused, not buffered).
MAX_RESPONSE_BYTES: Final = 16 * 1024 * 1024
_RETRY_STATUSES: Final = frozenset({408, 429})
_ids: Final = itertools.count(1)
#: Who is calling, as the remote's logs see it (`clientInfo`).
CLIENT_INFO: Final = {"name": "tether-remote-call", "version": "1"}

#: httpx's failures, as this layer reads them (the first matching class wins).
_TRANSPORT_ERRORS: Final[tuple[tuple[type[httpx.HTTPError], type[Exception]], ...]] = (
    (httpx.UnsupportedProtocol, RemoteProtocolError),  # a URL it cannot speak: never retried
    (httpx.TransportError, Transient),  # connect/read/write failures and timeouts
    (httpx.HTTPError, RemoteProtocolError),  # decoding errors, redirect loops
)


@contextlib.contextmanager
def _translated(remote: str, tool: str) -> Iterator[None]:
    """httpx's errors as ours (`_TRANSPORT_ERRORS`), the message naming the failure only."""
    try:
        yield
    except httpx.HTTPError as exc:
        ours = next(cls for kind, cls in _TRANSPORT_ERRORS if isinstance(exc, kind))
        message = f"{type(exc).__name__} talking to remote {remote!r}"
        if ours is Transient:
            raise Transient(message) from exc
        raise RemoteProtocolError(message, remote=remote, tool=tool) from exc


def bearer(remote: Remote) -> dict[str, str]:
    """The Authorization header from the remote's `token_env`, read now (empty without one).

    Raises:
        RemoteError: the variable is not set (named; its value never shown).
    """
    if remote.token_env is None:
        return {}
    token = os.environ.get(remote.token_env, "").strip()
    if not token:
        raise RemoteError(
            f"the environment variable {remote.token_env} that holds remote "
            f"{remote.name!r}'s token is not set",
            remote=remote.name,
        )
    return {"authorization": f"Bearer {token}"}


@dataclass(frozen=True)
class Rpc:
    """One JSON-RPC request to a remote: its method, params and routing name. `mcp=False`:
    plain JSON-RPC over HTTP (another protocol, such as A2A): no MCP headers and no `_meta`,
    the same authentication, tracing, error mapping and metrics."""

    method: str
    params: Mapping[str, Any]
    name: str | None = None  # the `Mcp-Name` header (a tool's name, a task's id)
    capabilities: Mapping[str, Any] | None = None
    headers: Mapping[str, str] | None = None
    timeout_s: float | None = None
    mcp: bool = True


@dataclass(frozen=True)
class Transport:
    """Requests to one remote for one tool call."""

    remote: Remote
    client: httpx.AsyncClient
    tool: str
    #: What this process knows of the remotes' tools (None: nothing, no parameter headers).
    tool_lists: ToolLists | None = None

    async def request(self, rpc: Rpc) -> dict[str, Any]:
        """Send `rpc`; return the JSON-RPC result object.

        Raises:
            Transient: worth retrying (module docstring).
            RemoteProtocolError: refused; `.code` is the JSON-RPC code when there is one.
            RemoteError: the remote's token variable is not set.
        """
        began = time.perf_counter()
        outcome = "transport"
        try:
            with tracing.span(
                f"tether.remote {rpc.method}",
                kind=SpanKind.CLIENT,
                attributes={
                    "rpc.system": "jsonrpc",
                    "rpc.method": rpc.method,
                    "tether.remote": self.remote.name,
                    "tether.remote.tool": self.tool,
                },
            ) as span:
                result, outcome = await self._send(rpc)
                tracing.outcome(span, outcome, error=outcome != "ok")
                return result
        except RemoteProtocolError as exc:
            outcome = "rpc_error" if exc.code is not None else "refused"
            raise
        finally:
            metrics.remote_request(
                self.remote.name, rpc.method, outcome, time.perf_counter() - began
            )

    async def _send(self, rpc: Rpc) -> tuple[dict[str, Any], str]:
        request_id, headers, body = self._prepare(rpc)
        read = rpc.timeout_s if rpc.timeout_s is not None else self.remote.request_timeout_s
        timeout = httpx.Timeout(read, connect=min(read, CONNECT_TIMEOUT_S))
        with _translated(self.remote.name, self.tool):
            async with self.client.stream(
                "POST", self.remote.url, content=body, headers=headers, timeout=timeout
            ) as response:
                status = response.status_code
                if status >= 500 or status in _RETRY_STATUSES:
                    raise Transient(f"remote {self.remote.name!r} answered HTTP {status}")
                kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
                raw = await _read_capped(response.aiter_bytes())
        message = self._message(raw, kind, request_id, status)
        if "error" in message:
            raise self._rpc_error(message["error"], status)
        result = message.get("result")
        if not isinstance(result, dict) or not 200 <= status < 300:
            raise self._refused(f"HTTP {status} without a JSON-RPC result")
        return result, "ok"

    def _prepare(self, rpc: Rpc) -> tuple[str, dict[str, str], bytes]:
        """The request's id, headers and body."""
        request_id = f"tether-{next(_ids)}"
        headers = {
            **self.remote.headers,
            **bearer(self.remote),
            "content-type": spec.JSON,
            "accept": f"{spec.JSON}, {spec.SSE}",
        }
        params = dict(rpc.params)
        traceparent = tracing.current_traceparent()
        if traceparent is not None:
            headers[spec.META_TRACEPARENT] = traceparent
        if rpc.mcp:
            headers[spec.H_PROTOCOL_VERSION] = spec.VERSION
            headers[spec.H_METHOD] = rpc.method
            if rpc.name is not None:
                headers[spec.H_NAME] = header_value(rpc.name)
            meta: dict[str, Any] = {
                spec.META_PROTOCOL_VERSION: spec.VERSION,
                spec.META_CLIENT_CAPABILITIES: dict(rpc.capabilities or {}),
                spec.META_CLIENT_INFO: CLIENT_INFO,
            }
            if traceparent is not None:
                meta[spec.META_TRACEPARENT] = traceparent
            params["_meta"] = meta
        headers.update(rpc.headers or {})
        body = orjson.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": rpc.method, "params": params}
        )
        return request_id, headers, body

    @contextlib.asynccontextmanager
    async def listen(
        self, rpc: Rpc, *, idle_s: float
    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """Open `rpc` (a `subscriptions/listen`) as a stream: the block reads the messages the
        remote sends on it as they arrive, until the remote ends it (a remote that answers with
        a plain JSON result instead has sent nothing). One metric sample, for the opening.

        Raises (entering, or reading the messages):
            Transient: not reached, HTTP 5xx, 408 or 429, the stream broke off or stayed
                silent for `idle_s` seconds.
            RemoteProtocolError: refused; `.code` is the JSON-RPC code when there is one.
            RemoteError: the remote's token variable is not set.
        """
        began = time.perf_counter()
        outcome = "transport"
        connect = min(self.remote.request_timeout_s, CONNECT_TIMEOUT_S)
        timeout = httpx.Timeout(self.remote.request_timeout_s, connect=connect, read=idle_s)
        async with contextlib.AsyncExitStack() as stack:
            try:
                request_id, headers, body = self._prepare(rpc)
                with _translated(self.remote.name, self.tool):
                    response = await stack.enter_async_context(
                        self.client.stream(
                            "POST", self.remote.url, content=body, headers=headers, timeout=timeout
                        )
                    )
                    messages = await self._opened(response, request_id)
                outcome = "ok"
            except RemoteProtocolError as exc:
                outcome = "rpc_error" if exc.code is not None else "refused"
                raise
            finally:
                metrics.remote_request(
                    self.remote.name, rpc.method, outcome, time.perf_counter() - began
                )
            try:
                yield messages
            finally:
                await messages.aclose()

    async def _opened(
        self, response: httpx.Response, request_id: str
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The messages of an opened stream; raises what its answer means when it is none."""
        status = response.status_code
        if status >= 500 or status in _RETRY_STATUSES:
            raise Transient(f"remote {self.remote.name!r} answered HTTP {status}")
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == spec.SSE and status == 200:
            return self._events(response)
        message = self._message(
            await _read_capped(response.aiter_bytes()), kind, request_id, status
        )
        if "error" in message:
            raise self._rpc_error(message["error"], status)
        return _nothing()

    async def _events(self, response: httpx.Response) -> AsyncGenerator[dict[str, Any], None]:
        """The JSON objects of an SSE body as they arrive (other events are skipped); an event
        or a line longer than MAX_RESPONSE_BYTES is refused, never buffered past it."""
        with _translated(self.remote.name, self.tool):
            messages = sse.stream(response.aiter_bytes(), limit=MAX_RESPONSE_BYTES)
            try:
                async with contextlib.aclosing(messages):
                    async for message in messages:
                        yield message
            except sse.EventTooLarge as exc:
                raise self._refused(str(exc)) from exc

    def _message(self, raw: bytes, kind: str, request_id: str, status: int) -> dict[str, Any]:
        """The JSON-RPC response to `request_id` in the body (JSON, or an SSE stream)."""
        try:
            if kind == spec.SSE:
                found = next((m for m in sse.messages(raw) if m.get("id") == request_id), None)
            else:
                found = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            found = None
        if not isinstance(found, dict) or ("result" not in found and "error" not in found):
            raise self._refused(f"HTTP {status} without a JSON-RPC response")
        return found

    def _rpc_error(self, error: Any, status: int) -> RemoteProtocolError:
        err = error if isinstance(error, dict) else {}
        code = err.get("code")
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        message = str(err.get("message") or f"HTTP {status}")
        return RemoteProtocolError(
            message, remote=self.remote.name, tool=self.tool, code=code, data=err.get("data")
        )

    def _refused(self, why: str) -> RemoteProtocolError:
        return RemoteProtocolError(
            f"remote {self.remote.name!r} refused the request: {why}",
            remote=self.remote.name,
            tool=self.tool,
        )


async def _nothing() -> AsyncGenerator[dict[str, Any], None]:
    """A stream that ended before its first message."""
    none: tuple[dict[str, Any], ...] = ()
    for message in none:
        yield message


async def _read_capped(chunks: AsyncIterator[bytes]) -> bytes:
    """The body, refused once it passes MAX_RESPONSE_BYTES (never buffered past it)."""
    out = bytearray()
    async for chunk in chunks:
        out += chunk
        if len(out) > MAX_RESPONSE_BYTES:
            raise RemoteProtocolError(f"the response is larger than {MAX_RESPONSE_BYTES} bytes")
    return bytes(out)
