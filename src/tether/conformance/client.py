"""Raw JSON-RPC over HTTP for the harness: every header and body byte under the caller's control.

Every request is recorded as an `Exchange` (request and response, for `--verbose` and the
reports). Waits are bounded by the client timeout. httpx reads `HTTP(S)_PROXY` / `NO_PROXY`
from the environment, so the harness works through an HTTP proxy.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import itertools
import json
import os
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from tether.conformance import spec

Headers = Sequence[tuple[str, str]]
#: How much of a body the reports keep.
DETAIL_LIMIT = 4000
#: Request headers whose values never reach a report (credentials passed with --header).
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key"})


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One verifying context per process: building one costs tens of milliseconds."""
    return httpx.create_ssl_context(trust_env=True)


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def make_meta(
    caps: Any = spec.CAPS_TASKS, *, version: str = spec.VERSION, **extra: Any
) -> dict[str, Any]:
    """The standard request `_meta` (protocol version, capabilities, client info)."""
    return {
        spec.META_PROTOCOL_VERSION: version,
        spec.META_CLIENT_CAPABILITIES: _plain(caps),
        spec.META_CLIENT_INFO: {"name": "tether-conformance", "version": "1"},
        **extra,
    }


def _plain(value: Any) -> Any:
    """Mappings (e.g. MappingProxyType constants) as plain dicts, recursively."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def b64(value: str) -> str:
    """The Base64 sentinel form of a header value."""
    return (
        spec.BASE64_PREFIX + base64.b64encode(value.encode("utf-8")).decode() + spec.BASE64_SUFFIX
    )


def header_value(value: str) -> str:
    """`value` as a header value: plain when safe, else the Base64 sentinel (value-encoding)."""
    unsafe = any(ord(c) < 0x20 or ord(c) >= 0x7F for c in value)
    sentinel = value.startswith(spec.BASE64_PREFIX) and value.endswith(spec.BASE64_SUFFIX)
    if unsafe or sentinel or value != value.strip(" \t"):
        return b64(value)
    return value


def sse_messages(text: str) -> list[dict[str, Any]]:
    """The JSON messages carried by an SSE body (unparseable events are skipped)."""
    out: list[dict[str, Any]] = []
    for event in text.replace("\r\n", "\n").split("\n\n"):
        data = [
            line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:")
        ]
        if not data:
            continue
        try:
            message = json.loads("\n".join(data))
        except ValueError:
            continue
        if isinstance(message, dict):
            out.append(message)
    return out


@dataclass
class Exchange:
    """One HTTP request and what came back (or the transport error instead)."""

    http_method: str
    url: str
    request_headers: list[tuple[str, str]]
    request_body: str | None
    sent: Any = None
    status: int | None = None
    response_headers: dict[str, str] = field(default_factory=dict)
    response_text: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    transport_error: str | None = None

    @property
    def content_type(self) -> str:
        return self.response_headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def is_sse(self) -> bool:
        return self.content_type == spec.SSE

    @property
    def reply(self) -> dict[str, Any] | None:
        """The JSON-RPC response object (the last message with a result or an error)."""
        found = [m for m in self.messages if "result" in m or "error" in m]
        return found[-1] if found else None

    @property
    def result(self) -> dict[str, Any] | None:
        value: Any = (self.reply or {}).get("result")
        return value if isinstance(value, dict) else None

    @property
    def error(self) -> dict[str, Any] | None:
        value: Any = (self.reply or {}).get("error")
        return value if isinstance(value, dict) else None

    @property
    def code(self) -> int | None:
        code = (self.error or {}).get("code")
        return code if isinstance(code, int) and not isinstance(code, bool) else None

    @property
    def rpc_method(self) -> str | None:
        method = self.sent.get("method") if isinstance(self.sent, dict) else None
        return method if isinstance(method, str) else None

    def header(self, name: str) -> str | None:
        return self.response_headers.get(name.lower())

    def sent_header(self, name: str) -> str | None:
        return next((v for k, v in self.request_headers if k.lower() == name.lower()), None)

    def summary(self) -> str:
        what = self.rpc_method or self.http_method
        if self.transport_error:
            return f"{what} -> {self.transport_error}"
        tail = f" error {self.code}" if self.error is not None else ""
        tail = tail or (" result" if self.result is not None else "")
        return f"{what} -> HTTP {self.status}{tail}"

    def details(self) -> dict[str, Any]:
        return {
            "request": {
                "method": self.http_method,
                "url": self.url,
                "headers": [
                    [k, "<redacted>" if k.lower() in SECRET_HEADERS else v]
                    for k, v in self.request_headers
                ],
                "body": (self.request_body or "")[:DETAIL_LIMIT],
            },
            "response": {
                "status": self.status,
                "headers": dict(self.response_headers),
                "body": self.response_text[:DETAIL_LIMIT],
                "transport_error": self.transport_error,
            },
        }


def _with_overrides(base: dict[str, str], overrides: Mapping[str, str | None]) -> dict[str, str]:
    out = dict(base)
    for name, value in overrides.items():
        for existing in [k for k in out if k.lower() == name.lower()]:
            del out[existing]
        if value is not None:
            out[name] = value
    return out


class Client:
    """A raw MCP client: baseline requests (CHECKLIST "B(method, params)") and arbitrary ones."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url
        self.extra_headers = dict(headers or {})
        self.timeout = timeout
        self._transport = transport
        self.http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout),
            transport=transport,
            follow_redirects=False,
            verify=_ssl_context(),
        )
        self.exchanges: list[Exchange] = []
        self._ids = itertools.count(1)

    async def aclose(self) -> None:
        await self.http.aclose()

    def fresh(self) -> Client:
        """Another client for the same server: new connections, same headers and transport."""
        return Client(
            self.url, headers=self.extra_headers, timeout=self.timeout, transport=self._transport
        )

    def next_id(self) -> int:
        return next(self._ids)

    def headers(self, method: str | None, params: Any = None) -> dict[str, str]:
        """The baseline headers of a request for `method` (with `Mcp-Name` when it applies)."""
        h = {
            "Content-Type": spec.JSON,
            "Accept": spec.ACCEPT,
            spec.H_PROTOCOL_VERSION: spec.VERSION,
        }
        if method is not None:
            h[spec.H_METHOD] = method
            name_field = spec.NAME_FIELDS.get(method)
            value = params.get(name_field) if isinstance(params, dict) and name_field else None
            if isinstance(value, str):
                h[spec.H_NAME] = header_value(value)
        return _with_overrides(h, self.extra_headers)

    async def send(
        self, http_method: str, headers: Mapping[str, str] | Headers, content: bytes | None = None
    ) -> Exchange:
        """Send one HTTP request; never raises for transport errors (they are recorded)."""
        pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
        text = content.decode("utf-8", errors="replace") if content is not None else None
        ex = Exchange(http_method, self.url, pairs, text, sent=_loads(content))
        try:
            resp = await self.http.request(http_method, self.url, headers=pairs, content=content)
        except httpx.LocalProtocolError as exc:
            if content is None or not self._raw_allowed():
                ex.transport_error = f"cannot send these headers: {exc}"
            else:  # h11 refuses e.g. surrounding spaces in a value; write the bytes ourselves
                await self._send_raw(ex, pairs, content)
        except httpx.HTTPError as exc:
            ex.transport_error = f"{type(exc).__name__}: {exc}"
        else:
            _fill(ex, resp.status_code, resp.headers.multi_items(), resp.text)
        self.exchanges.append(ex)
        return ex

    async def post(self, body: Any, headers: Mapping[str, str] | Headers) -> Exchange:
        return await self.send("POST", headers, body if isinstance(body, bytes) else dumps(body))

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        caps: Any = spec.CAPS_TASKS,
        headers: Mapping[str, str | None] | None = None,
        request_id: Any = None,
    ) -> Exchange:
        """A well-formed request (`_meta` added unless present); `headers` overrides the
        baseline headers (None removes one)."""
        p = dict(params or {})
        p.setdefault("_meta", make_meta(caps))
        h = _with_overrides(self.headers(method, p), headers or {})
        rid = self.next_id() if request_id is None else request_id
        return await self.post({"jsonrpc": "2.0", "id": rid, "method": method, "params": p}, h)

    async def listen(self, params: dict[str, Any], request_id: Any, window: float) -> Exchange:
        """`subscriptions/listen`, read until the stream ends or `window` seconds pass (a
        listen stream may stay open for ever); the messages read so far are recorded."""
        p = dict(params)
        p.setdefault("_meta", make_meta(spec.CAPS_TASKS))
        body = dumps({"jsonrpc": "2.0", "id": request_id, "method": spec.LISTEN, "params": p})
        pairs = list(self.headers(spec.LISTEN, p).items())
        ex = Exchange("POST", self.url, pairs, body.decode("utf-8"), sent=_loads(body))
        chunks: list[str] = []
        try:
            async with self.http.stream("POST", self.url, headers=pairs, content=body) as resp:
                try:
                    async with asyncio.timeout(window):
                        async for chunk in resp.aiter_text():
                            chunks.append(chunk)  # noqa: PERF401 — keep what came before a timeout
                except TimeoutError:
                    pass  # the window closed; what arrived is judged
                _fill(ex, resp.status_code, resp.headers.multi_items(), "".join(chunks))
        except httpx.HTTPError as exc:
            ex.transport_error = f"{type(exc).__name__}: {exc}"
        self.exchanges.append(ex)
        return ex

    def _raw_allowed(self) -> bool:
        u = httpx.URL(self.url)
        proxied = any(os.environ.get(k) for k in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"))
        return u.scheme == "http" and not proxied

    async def _send_raw(self, ex: Exchange, pairs: list[tuple[str, str]], content: bytes) -> None:
        """HTTP/1.1 over a bare socket, for header bytes h11 will not send."""
        u = httpx.URL(self.url)
        port = u.port or 80
        lines = [f"POST {u.raw_path.decode()} HTTP/1.1", f"Host: {u.host}:{port}"]
        lines += [f"{k}: {v}" for k, v in pairs]
        lines += [f"Content-Length: {len(content)}", "Connection: close", "", ""]
        try:
            async with asyncio.timeout(self.timeout):
                reader, writer = await asyncio.open_connection(u.host, port)
                try:
                    writer.write("\r\n".join(lines).encode("latin-1") + content)
                    await writer.drain()
                    raw = await reader.read()
                finally:
                    writer.close()
        except (OSError, TimeoutError) as exc:
            ex.transport_error = f"{type(exc).__name__}: {exc}"
            return
        head, _, body = raw.partition(b"\r\n\r\n")
        head_lines = head.decode("latin-1").split("\r\n")
        try:
            status = int(head_lines[0].split(" ", 2)[1])
        except (IndexError, ValueError):
            ex.transport_error = f"unreadable HTTP response: {head_lines[0]!r}"
            return
        hdrs = [
            tuple(x.strip() for x in line.split(":", 1)) for line in head_lines[1:] if ":" in line
        ]
        if any(k.lower() == "transfer-encoding" and "chunked" in v.lower() for k, v in hdrs):
            body = _dechunk(body)
        _fill(ex, status, [(k, v) for k, v in hdrs], body.decode("utf-8", errors="replace"))


def _dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0], 16)
        except ValueError:
            return out
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2 :]
    return out


def _loads(content: bytes | None) -> Any:
    if content is None:
        return None
    try:
        return json.loads(content)
    except ValueError:
        return None


def _fill(ex: Exchange, status: int, headers: Sequence[tuple[str, str]], text: str) -> None:
    ex.status = status
    ex.response_headers = {k.lower(): v for k, v in headers}
    ex.response_text = text
    if ex.is_sse:
        ex.messages = sse_messages(text)
    elif text.strip():
        parsed = _loads(text.encode("utf-8"))
        if isinstance(parsed, dict):
            ex.messages = [parsed]
