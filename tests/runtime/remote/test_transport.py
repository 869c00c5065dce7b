"""JSON-RPC over Streamable HTTP to a remote, outbound calls scripted with respx: what each
request carries (headers, `_meta`, the bearer token read when sent) and how each answer is
read (JSON, an SSE stream) or told apart (transient vs refused). Spec: 2026-07-28
Streamable HTTP (headers, the Base64 sentinel), JSON-RPC 2.0."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx

from tether.runtime.remote import spec
from tether.runtime.remote.config import Remote
from tether.runtime.remote.errors import RemoteError, RemoteProtocolError, Transient
from tether.runtime.remote.headers import header_value
from tether.runtime.remote.transport import MAX_RESPONSE_BYTES, Rpc, Transport

URL = "http://remote.test/mcp"
#: Names of environment variables that hold (or would hold) a token.
BEARER_ENV = "PEER_TOKEN"
UNSET_VAR = "PEER_TOKEN_UNSET"


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as http:
        yield http


def _transport(client: httpx.AsyncClient, **kwargs: Any) -> Transport:
    return Transport(Remote("peer", URL, **kwargs), client, "tool")


def _ok(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": {"ok": 1}})


async def test_a_request_carries_the_routing_headers_meta_and_the_token_read_when_sent(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spec: MCP-Protocol-Version, Mcp-Method, Mcp-Name mirror the body; `_meta` carries the
    version and capabilities. Ours: the bearer token comes from token_env at each request."""
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return _ok(request)

    transport = _transport(client, token_env=BEARER_ENV, headers={"X-Team": "a"})
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(side_effect=answer)
        monkeypatch.setenv(BEARER_ENV, "first")
        rpc = Rpc("tasks/get", {"taskId": "tk é"}, name="tk é", capabilities={"x": {}})
        assert await transport.request(rpc) == {"ok": 1}
        monkeypatch.setenv(BEARER_ENV, "second")
        await transport.request(
            Rpc("tools/call", {"name": "t"}, name="t", headers={"idempotency-key": "k"})
        )
    first, second = seen
    assert first.headers["mcp-protocol-version"] == spec.VERSION
    assert first.headers["mcp-method"] == "tasks/get"
    assert first.headers["mcp-name"] == header_value("tk é") != "tk é"
    assert first.headers["authorization"] == "Bearer first"
    assert second.headers["authorization"] == "Bearer second"
    assert second.headers["idempotency-key"] == "k"
    assert first.headers["x-team"] == "a"
    assert "application/json" in first.headers["accept"] and spec.SSE in first.headers["accept"]
    meta = json.loads(first.content)["params"]["_meta"]
    assert meta[spec.META_PROTOCOL_VERSION] == spec.VERSION
    assert meta[spec.META_CLIENT_CAPABILITIES] == {"x": {}}


def test_a_plain_header_value_goes_as_is_and_others_in_the_base64_sentinel() -> None:
    """Spec: non-ASCII, control characters, surrounding blanks, or a value shaped like the
    sentinel itself are Base64-encoded."""
    assert header_value("tk_1") == "tk_1"
    for value in ("ü", " lead", "a\nb", "=?base64?eA==?="):
        encoded = header_value(value)
        assert encoded.startswith(spec.BASE64_PREFIX) and encoded.endswith(spec.BASE64_SUFFIX)


async def test_a_missing_token_variable_is_an_error_naming_it(client: httpx.AsyncClient) -> None:
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post(URL).mock(side_effect=_ok)
        with pytest.raises(RemoteError) as caught:
            await _transport(client, token_env=UNSET_VAR).request(Rpc("tasks/get", {}))
    assert UNSET_VAR in str(caught.value)
    assert not route.called  # nothing was sent


async def test_an_sse_answer_is_read_to_the_response_to_this_request(
    client: httpx.AsyncClient,
) -> None:
    """Spec: a request may be answered with an SSE stream; notifications come first."""

    def answer(request: httpx.Request) -> httpx.Response:
        rid = json.loads(request.content)["id"]
        note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}
        other = {"jsonrpc": "2.0", "id": "someone-else", "result": {"no": 1}}
        mine = {"jsonrpc": "2.0", "id": rid, "result": {"yes": 1}}
        text = "".join(f"event: message\ndata: {json.dumps(m)}\n\n" for m in (note, other, mine))
        return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})

    with respx.mock() as mock:
        mock.post(URL).mock(side_effect=answer)
        assert await _transport(client).request(Rpc("tools/call", {})) == {"yes": 1}


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(500),
        httpx.Response(503, json={"jsonrpc": "2.0", "id": 1, "error": {"code": -31000}}),
        httpx.Response(429),
        httpx.Response(408),
        httpx.ConnectError("refused"),
        httpx.ReadTimeout("slow"),
    ],
    ids=["500", "503", "429", "408", "connect", "read-timeout"],
)
async def test_transport_errors_and_5xx_are_transient(
    client: httpx.AsyncClient, response: Any
) -> None:
    """Our choice: the request may not have arrived, or the remote cannot serve now: retry."""
    with respx.mock() as mock:
        route = mock.post(URL)
        if isinstance(response, Exception):
            route.mock(side_effect=response)
        else:
            route.mock(return_value=response)
        with pytest.raises(Transient):
            await _transport(client).request(Rpc("tasks/get", {}))


async def test_a_json_rpc_error_is_refused_with_its_code_whatever_the_status(
    client: httpx.AsyncClient,
) -> None:
    """A -32602 answered with HTTP 400 (as some servers do) or 200 is the same refusal."""
    for status in (200, 400):

        def answer(request: httpx.Request, status: int = status) -> httpx.Response:
            rid = json.loads(request.content)["id"]
            error = {"code": -32602, "message": "Task not found", "data": {"x": 1}}
            return httpx.Response(status, json={"jsonrpc": "2.0", "id": rid, "error": error})

        with respx.mock() as mock:
            mock.post(URL).mock(side_effect=answer)
            with pytest.raises(RemoteProtocolError) as caught:
                await _transport(client).request(Rpc("tasks/get", {}))
        assert (caught.value.code, str(caught.value), caught.value.data) == (
            -32602,
            "Task not found",
            {"x": 1},
        )


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(401, text="no"),
        httpx.Response(404, json={"detail": "not here"}),
        httpx.Response(200, text="not json"),
        httpx.Response(200, json={"jsonrpc": "2.0", "id": 1}),
        httpx.Response(302, headers={"location": "http://elsewhere.test/"}),
    ],
    ids=["401", "404", "not-json", "no-result", "redirect"],
)
async def test_a_refusal_without_a_json_rpc_error_is_a_protocol_error_without_code(
    client: httpx.AsyncClient, response: httpx.Response
) -> None:
    """Our choice: never retried (it would be refused again); no redirect is followed."""
    with respx.mock() as mock:
        mock.post(URL).mock(return_value=response)
        with pytest.raises(RemoteProtocolError) as caught:
            await _transport(client).request(Rpc("tasks/get", {}))
    assert caught.value.code is None


async def test_a_response_over_the_cap_is_refused(client: httpx.AsyncClient) -> None:
    with respx.mock() as mock:
        mock.post(URL).mock(
            return_value=httpx.Response(200, content=b"x" * (MAX_RESPONSE_BYTES + 1))
        )
        with pytest.raises(RemoteProtocolError):
            await _transport(client).request(Rpc("tasks/get", {}))


async def test_a_plain_json_rpc_request_carries_no_mcp_headers_or_meta(
    client: httpx.AsyncClient,
) -> None:
    """For another remote protocol (A2A speaks JSON-RPC over HTTP too): the same transport,
    without MCP's routing headers and `_meta`."""
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return _ok(request)

    with respx.mock() as mock:
        mock.post(URL).mock(side_effect=answer)
        await _transport(client).request(Rpc("message/send", {"message": {}}, mcp=False))
    (request,) = seen
    assert "mcp-method" not in request.headers and "mcp-protocol-version" not in request.headers
    assert json.loads(request.content)["params"] == {"message": {}}


async def _read_all(transport: Transport) -> list[dict[str, Any]]:
    rpc = Rpc(spec.LISTEN, {"notifications": {"taskIds": ["tk_1"]}})
    async with transport.listen(rpc, idle_s=5) as messages:
        return [m async for m in messages]


def _sse(chunks: list[bytes]) -> httpx.Response:
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return httpx.Response(200, headers={"content-type": spec.SSE}, content=body())


async def test_a_listen_stream_is_read_as_its_events_arrive_whatever_their_chunks(
    client: httpx.AsyncClient,
) -> None:
    """Spec (SSE): an event is its `data:` lines up to a blank line, CRLF or LF; other
    fields and events that are not JSON objects are skipped."""
    first = b'event: message\r\ndata: {"method": "a",\r\ndata:  "params": {}}\r\n\r\n'
    second = b'id: 7\ndata: {"method": "b"}\n\ndata: not json\n\ndata: [1]\n\n'
    split = [first[:9], first[9:40], first[40:], second]
    with respx.mock() as mock:
        mock.post(URL).mock(return_value=_sse(split))
        messages = await _read_all(_transport(client))
    assert messages == [{"method": "a", "params": {}}, {"method": "b"}]


async def test_a_listen_event_over_the_cap_is_refused_not_buffered(
    client: httpx.AsyncClient,
) -> None:
    big = [b"data: " + b"x" * (MAX_RESPONSE_BYTES // 2), b"x" * (MAX_RESPONSE_BYTES // 2 + 8)]
    with respx.mock() as mock:
        mock.post(URL).mock(return_value=_sse(big))
        with pytest.raises(RemoteProtocolError):
            await _read_all(_transport(client))


async def test_a_listen_refused_or_unreachable_is_told_apart_like_any_request(
    client: httpx.AsyncClient,
) -> None:
    """A JSON-RPC error instead of a stream is the refusal with its code; 5xx is transient;
    a stream that breaks off while read is transient."""

    def missing(request: httpx.Request) -> httpx.Response:
        rid = json.loads(request.content)["id"]
        error = {"code": -32601, "message": "Method not found"}
        return httpx.Response(404, json={"jsonrpc": "2.0", "id": rid, "error": error})

    async def broken() -> AsyncIterator[bytes]:
        yield b'data: {"method": "a"}\n\n'
        raise httpx.ReadError("reset")

    with respx.mock() as mock:
        route = mock.post(URL)
        route.mock(side_effect=missing)
        with pytest.raises(RemoteProtocolError) as caught:
            await _read_all(_transport(client))
        assert caught.value.code == -32601
        route.mock(return_value=httpx.Response(503))
        with pytest.raises(Transient):
            await _read_all(_transport(client))
        route.mock(
            return_value=httpx.Response(200, headers={"content-type": spec.SSE}, content=broken())
        )
        with pytest.raises(Transient):
            await _read_all(_transport(client))
