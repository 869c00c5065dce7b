"""The security layer wraps the whole app (docs/security.md; as Starlette keeps
trusted-host and CORS apart from routing): every route of `create_app` — found by enumerating
`app.routes`, so a new route is covered the day it is added — refuses a foreign Host or Origin
(403) and, with tokens configured, an anonymous or unknown caller (401 with a Bearer
challenge); a known caller passes through with its principal in the ASGI scope."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.types import Message, Receive, Scope, Send

from tether.app import PROBES, create_app
from tether.examples import app as examples
from tether.jsonrpc import codes
from tether.jsonrpc.http import PRINCIPAL_KEY
from tether.principal import Principal
from tether.security.hosts import HostPolicy
from tether.security.middleware import SecurityMiddleware
from tether.security.tokens import ANONYMOUS, DEV, Authenticator, new_token
from tether.settings import Settings

READER, READER_ENTRY = new_token("ann", "reader")
MUTATION = orjson.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "start_long_job", "arguments": {}},
    }
)


def web_app(**settings: Any) -> Starlette:
    """The real app (its lifespan not run: the security layer answers before any handler, and
    a request that passes it meets a route still starting, 503)."""
    return create_app(examples, Settings.model_validate(settings), "postgresql://unused")


def routes(web: Starlette) -> list[tuple[str, str]]:
    """(method, path) to probe on each route: POST where it is accepted, else its first."""
    out = []
    for route in web.routes:
        if isinstance(route, Mount) and route.path == "/console":
            continue  # signs in by cookie and checks it itself: tests/console
        assert isinstance(route, Route), f"extend this test to {route!r}"
        methods = sorted(route.methods or {"POST"})
        out.append(("POST" if "POST" in methods else methods[0], route.path))
    assert {path for _, path in out} >= {"/mcp", "/healthz"}
    return out


@pytest.fixture
async def client_for() -> AsyncIterator[Any]:
    clients: list[httpx.AsyncClient] = []

    def make(web: Starlette) -> httpx.AsyncClient:
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=web), base_url="http://127.0.0.1:8000"
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


def error_code(resp: httpx.Response) -> int:
    body = resp.json()
    assert resp.headers["content-type"] == "application/json"
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    code: int = body["error"]["code"]
    return code


async def test_every_route_refuses_an_anonymous_request_when_tokens_are_configured(
    client_for: Any,
) -> None:
    """No token or an unknown one → 401, `WWW-Authenticate: Bearer`, -31002; a known token
    (even a reader's, for a mutation: the role check is the endpoint's) gets past the layer.
    Probe paths (/healthz) are the exception: they let anonymous callers through and accept no
    mutation at all."""
    web = web_app(api_tokens=READER_ENTRY)
    client: httpx.AsyncClient = client_for(web)
    for method, path in routes(web):
        if path in PROBES:
            assert method == "GET" and (await client.post(path)).status_code == 405, path
            assert (await client.get(path)).status_code == 503, path  # passed the layer
            continue
        for auth in ({}, {"Authorization": "Bearer nope"}, {"Authorization": READER}):
            resp = await client.request(method, path, content=MUTATION, headers=auth)
            assert resp.status_code == 401, (method, path, auth)
            assert resp.headers["www-authenticate"].startswith("Bearer"), path
            assert error_code(resp) == codes.UNAUTHENTICATED
        resp = await client.request(
            method, path, content=MUTATION, headers={"Authorization": f"Bearer {READER}"}
        )
        assert resp.status_code == 503, (method, path)  # the route itself: still starting


@pytest.mark.parametrize(
    "foreign",
    [
        {"Host": "evil.example"},
        {"Host": "evil.example:8000"},
        {"Origin": "http://evil.example"},
        {"Origin": "https://127.0.0.1.evil.example"},
        {"Origin": "null"},
        {"Origin": "http://[::1"},  # malformed: refused, not a server error
    ],
)
async def test_host_and_origin_refusal_applies_on_every_route(
    client_for: Any, foreign: dict[str, str]
) -> None:
    """MCP transports (Origin validation), DNS rebinding: 403 with -31001 on every route, a
    valid token notwithstanding; the same request from loopback gets through."""
    web = web_app(api_tokens=READER_ENTRY)
    client: httpx.AsyncClient = client_for(web)
    auth = {"Authorization": f"Bearer {READER}"}
    for method, path in routes(web):
        resp = await client.request(method, path, content=MUTATION, headers={**auth, **foreign})
        assert resp.status_code == 403, (method, path)
        assert error_code(resp) == codes.UNAUTHORIZED
        ok = await client.request(
            method, path, content=MUTATION, headers={**auth, "Origin": "http://localhost:8000"}
        )
        assert ok.status_code == 503, (method, path)


async def test_configured_hosts_and_origins_are_allowed(client_for: Any) -> None:
    """TETHER_ALLOWED_HOSTS adds Host names (and http(s) Origins on them); TETHER_ALLOWED_ORIGINS
    adds exact Origins."""
    web = web_app(allowed_hosts="mcp.example", allowed_origins="https://app.example/")
    client: httpx.AsyncClient = client_for(web)
    for headers in (
        {"Host": "mcp.example:8443"},
        {"Origin": "https://mcp.example"},
        {"Origin": "https://app.example"},
    ):
        assert (await client.get("/healthz", headers=headers)).status_code == 503, headers
    assert (await client.get("/healthz", headers={"Host": "other.example"})).status_code == 403


# --- the middleware alone ----------------------------------------------------------------------


class Recorder:
    """An inner ASGI app that records the scopes it is called with, and answers 204."""

    def __init__(self) -> None:
        self.scopes: list[Scope] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scopes.append(scope)
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})


async def drive(
    layer: SecurityMiddleware, scope_type: str, headers: list[tuple[bytes, bytes]]
) -> list[Message]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": scope_type, "method": "GET", "path": "/", "headers": headers}
    await layer(scope, receive, send)
    return sent


def layer(inner: Recorder, tokens: str = "", host: str = "127.0.0.1") -> SecurityMiddleware:
    return SecurityMiddleware(
        inner,
        hosts=HostPolicy(),
        authenticator=Authenticator.from_settings(tokens, host, allow_unauthenticated=False),
    )


@pytest.mark.parametrize(
    ("tokens", "host", "principal"),
    [
        ("", "127.0.0.1", DEV),  # dev mode: loopback without tokens
        ("", "0.0.0.0", ANONYMOUS),  # noqa: S104 — off loopback without tokens: fail closed
        (READER_ENTRY, "127.0.0.1", Principal("ann", "reader")),
    ],
    ids=["dev", "anonymous", "reader"],  # READER_ENTRY is random: stable ids for xdist
)
async def test_the_principal_goes_into_the_scope(
    tokens: str, host: str, principal: Principal
) -> None:
    """Handlers read the principal from `scope["user"]` (Starlette's key); header names are
    matched case-insensitively."""
    inner = Recorder()
    sent = await drive(
        layer(inner, tokens, host), "http", [(b"Authorization", f"Bearer {READER}".encode())]
    )
    assert sent[0]["status"] == 204
    assert [s[PRINCIPAL_KEY] for s in inner.scopes] == [principal]


async def test_lifespan_passes_through_and_a_refused_websocket_is_closed() -> None:
    """Lifespan events are not requests; a WebSocket handshake meets the same policy (closed
    with 1008, policy violation, before the app sees it)."""
    inner = Recorder()
    await drive(layer(inner), "lifespan", [])
    assert [s["type"] for s in inner.scopes] == ["lifespan"]
    sent = await drive(layer(inner), "websocket", [(b"origin", b"http://evil.example")])
    assert sent == [{"type": "websocket.close", "code": 1008}]
    assert len(inner.scopes) == 1


async def test_every_route_refuses_a_declared_body_over_the_cap(client_for: Any) -> None:
    """TETHER_MAX_BODY_BYTES on every route, in the layer (413 before any handler); a body at
    the cap passes the layer."""
    web = web_app(max_body_bytes=len(MUTATION) - 1)
    client: httpx.AsyncClient = client_for(web)
    for method, path in routes(web):
        resp = await client.request(method, path, content=MUTATION)
        assert resp.status_code == 413, (method, path)
    web = web_app(max_body_bytes=len(MUTATION))
    client = client_for(web)
    for method, path in routes(web):
        if path not in PROBES:
            resp = await client.request(method, path, content=MUTATION)
            assert resp.status_code == 503, path


class FormReader:
    """An inner app that reads the whole body, as a form handler does, and then acts on it
    (here: records it and answers 204)."""

    def __init__(self) -> None:
        self.acted: list[bytes] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        self.acted.append(body)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


async def send_chunked(layer: SecurityMiddleware, chunks: list[bytes]) -> tuple[list[Message], int]:
    """POST `chunks` as a body without a Content-Length; the replies and the chunks taken."""
    taken = 0
    sent: list[Message] = []

    async def receive() -> Message:
        nonlocal taken
        taken += 1
        return {"type": "http.request", "body": chunks[taken - 1], "more_body": taken < len(chunks)}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/console/sign-in", "headers": []}
    await layer(scope, receive, send)
    return sent, taken


def capped(inner: Any, cap: int) -> SecurityMiddleware:
    return SecurityMiddleware(
        inner,
        hosts=HostPolicy(),
        authenticator=Authenticator.from_settings("", "127.0.0.1", allow_unauthenticated=False),
        max_body_bytes=cap,
    )


async def test_a_chunked_body_is_refused_as_soon_as_it_crosses_the_cap() -> None:
    """Our choice: the body cap holds for every route, a body without a Content-Length too: the
    read that crosses it fails (no later chunk is read), the handler acts on nothing, 413."""
    inner = FormReader()
    chunks = [b"a" * 100] * 10
    sent, taken = await send_chunked(capped(inner, 250), chunks)
    assert sent[0]["status"] == 413
    assert taken == 3  # 300 bytes read: past 250 on the third chunk, and not one more
    assert inner.acted == []
    sent, taken = await send_chunked(capped(inner, 1000), chunks)  # exactly at the cap
    assert (sent[0]["status"], taken) == (204, 10)
    assert inner.acted == [b"a" * 1000]
