"""The HTTP transport against a real server on loopback: tokens, the polling fallback when
the server serves no listen stream, an unreachable server; and what it sends (the protocol
facts it keeps equal the server's). Our choice (docs/client.md)."""

from __future__ import annotations

import contextlib
import secrets
from typing import Any

import httpx
import pytest

from tests.apps.client import app
from tests.e2e.conftest import serve
from tether.client import NotAuthorized, RunSnapshot, TransportError, WorkflowNotFound, connect
from tether.client import http as client_http
from tether.jsonrpc import codes
from tether.security import new_token
from tether.tools.catalog import Catalog

WAIT_S = 15.0


@pytest.mark.postgres
@pytest.mark.e2e
async def test_a_missing_or_wrong_token_is_not_authorized(db_url: str) -> None:
    """No token or an unknown one: NotAuthorized (401); a reader may not start runs or read
    tasks (403); an operator may."""
    reader, reader_entry = new_token("ann", "reader")
    operator, operator_entry = new_token("bob", "operator")
    async with serve(app, db_url, api_tokens=f"{reader_entry},{operator_entry}") as url:
        for token in (None, "not-a-token", reader):
            async with connect(url, token=token) as client:
                with pytest.raises(NotAuthorized):
                    await client.start("review", {"title": "A"})
        async with connect(url, token=operator) as client:
            run = await client.start("review", {"title": "A"})
            assert (await run.wait(timeout=WAIT_S)).needs_input
        async with connect(url, token=reader) as client:
            with pytest.raises(NotAuthorized):
                await client.get_handle(run.id).status()


@pytest.mark.postgres
@pytest.mark.e2e
async def test_following_polls_tasks_get_when_the_server_serves_no_stream(db_url: str) -> None:
    """With the caller's one listen stream taken (TETHER_MAX_SUBSCRIPTIONS=1, refused with
    -31010), a second watch polls tasks/get at the task's pollIntervalMs and still sees the
    wait and the end."""
    sent: list[str] = []

    async def record(request: httpx.Request) -> None:
        sent.append(request.headers[codes.H_METHOD])

    async with serve(app, db_url, max_subscriptions=1) as url, connect(url) as client:
        held = await client.start("review", {"title": "held"})
        run = await client.start("review", {"title": "polled"})
        async with contextlib.aclosing(held.watch()) as holding:
            await anext(holding)  # its stream is open now
            assert isinstance(client._transport, client_http.HttpTransport)
            client._transport._http.event_hooks["request"].append(record)
            seen: list[RunSnapshot] = []
            async with contextlib.aclosing(run.watch()) as changes:
                async for snapshot in changes:
                    seen.append(snapshot)
                    if snapshot.needs_input:
                        await run.answer("publish", {"decision": "approve", "ticket": "P"})
    assert any(s.needs_input for s in seen) and seen[-1].status == "completed"
    assert sent[0] == codes.LISTEN and codes.LISTEN not in sent[1:]
    # polls: the first read, at least the one that saw the end, and the answer's own read
    assert sent.count(client_http.TASKS_GET) >= 3


@pytest.mark.postgres
@pytest.mark.e2e
async def test_a_workflow_not_served_over_mcp_cannot_be_started_over_http(db_url: str) -> None:
    """`internal` has no start tool on the server: WorkflowNotFound (the database transport
    starts it: see test_database.py)."""
    async with serve(app, db_url) as url, connect(url) as client:
        with pytest.raises(WorkflowNotFound):
            await client.start("internal", {})


async def test_a_server_that_cannot_be_reached_is_a_transport_error() -> None:
    """Nothing listens on the port: every call is a TransportError."""
    async with connect("http://127.0.0.1:9/mcp", timeout=5) as client:
        with pytest.raises(TransportError):
            await client.start("review", {"title": "x"})
        with pytest.raises(TransportError):
            await client.get_handle("ex_x").status()
        with pytest.raises(TransportError):
            await client.get_handle("ex_x").wait(timeout=5)


async def test_an_answer_that_is_not_json_rpc_is_a_transport_error() -> None:
    """A server answering HTML (a proxy's error page, a wrong URL) is a TransportError; a
    bare 401 or 403 without a JSON-RPC body is NotAuthorized."""

    def respond(request: httpx.Request) -> httpx.Response:
        status = int(request.url.params.get("status", "502"))
        return httpx.Response(status, text="<html>nope</html>")

    transport = client_http.HttpTransport("http://t.invalid/mcp?status=502", token=None, timeout=5)
    await transport._http.aclose()
    transport._http = httpx.AsyncClient(transport=httpx.MockTransport(respond))
    with pytest.raises(TransportError):
        await transport.get("ex_x")
    for status in ("401", "403"):
        transport.url = f"http://t.invalid/mcp?status={status}"
        with pytest.raises(NotAuthorized):
            await transport.get("ex_x")
    await transport.aclose()


async def test_requests_carry_the_routing_headers_and_the_tasks_extension() -> None:
    """Spec (MCP 2026-07-28 Streamable HTTP; ext-tasks routing headers): the version, method
    and name headers mirror the body, and `_meta` declares the Tasks extension and form
    elicitation."""
    token = secrets.token_urlsafe()
    transport = client_http.HttpTransport("http://t.invalid/mcp", token=token, timeout=5)
    _, body, headers = transport._envelope(client_http.TASKS_GET, {"taskId": "ex_1"}, name="ex_1")
    sent: dict[str, Any] = httpx.Response(200, content=body).json()
    meta = sent["params"]["_meta"]
    assert headers[codes.H_PROTOCOL_VERSION] == meta[codes.META_PROTOCOL_VERSION]
    assert headers[codes.H_METHOD] == sent["method"] == "tasks/get"
    assert headers[codes.H_NAME] == sent["params"]["taskId"]
    caps = meta[codes.META_CLIENT_CAPABILITIES]
    assert caps == {"elicitation": {}, "extensions": {codes.TASKS_EXTENSION: {}}}
    assert transport._http.headers["authorization"] == f"Bearer {token}"
    await transport.aclose()


def test_an_unsafe_name_header_is_sent_base64_encoded() -> None:
    """Spec (2026-07-28 value encoding): non-ASCII, edge spaces and sentinel look-alikes
    travel in the `=?base64?…?=` form; a plain ASCII name as it is."""
    assert client_http.header_value("ex_abc") == "ex_abc"
    assert client_http.header_value("café") == "=?base64?Y2Fmw6k=?="
    assert client_http.header_value(" x") == "=?base64?IHg=?="
    assert client_http.header_value("=?base64?eA==?=").startswith("=?base64?PT9")


def test_a_token_that_cannot_be_a_header_is_refused() -> None:
    """Our choice: a token with spaces at its ends or non-ASCII text is a ValueError before
    anything is sent."""
    for token in ("", " tok", "tök"):
        with pytest.raises(ValueError, match="token"):
            client_http.HttpTransport("http://t.invalid/mcp", token=token, timeout=5)


def test_the_client_names_methods_and_tools_as_the_server_does() -> None:
    """The client's own protocol names are the server's: the task methods' name header fields
    and the start tool's name (the listen method and its notifications it takes from the
    server's constants)."""
    methods = (codes.TOOLS_CALL, client_http.TASKS_GET, client_http.TASKS_UPDATE)
    assert set(methods) | {client_http.TASKS_CANCEL} <= set(codes.NAME_FIELDS)
    names = {tool["name"] for tool in Catalog.build(app).listing}
    assert client_http.START_TOOL_PREFIX + "review" in names
