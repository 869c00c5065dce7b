"""`Mcp-Param-*` headers on a remote `tools/call`: which arguments are mirrored and how each
value is written (`param_headers`, pure), and where the schema comes from (the remote's
`tools/list`, read once and kept; read again once when the remote refuses the call for a
header). Spec: 2026-07-28 Streamable HTTP (SEP-2243 custom headers, the Base64 sentinel)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.runtime.remote.fake import CREATED, URL, FakeRemote, rpc_error
from tether.runtime.remote.clients import Clients
from tether.runtime.remote.config import Remote
from tether.runtime.remote.errors import RemoteProtocolError
from tether.runtime.remote.headers import header_value, param_headers
from tether.runtime.remote.mcp import McpTasks
from tether.runtime.remote.transport import Transport

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
        "bad": {"type": "string", "x-mcp-header": "Has Space"},
        "message": {"type": "string"},
    },
}
LISTED: dict[str, Any] = {
    "resultType": "complete",
    "tools": [{"name": "work", "inputSchema": SCHEMA}],
    "ttlMs": 60_000,
    "cacheScope": "private",
}
MISMATCH = rpc_error(-32020, "Mcp-Param-Region header is required", 400)


def test_each_marked_argument_present_and_not_null_gets_its_header() -> None:
    args = {"region": "eu", "count": 42, "verbose": False, "message": "m", "bad": "x"}
    assert param_headers(SCHEMA, args) == {
        "mcp-param-region": "eu",
        "mcp-param-count": "42",
        "mcp-param-verbose": "false",
    }


def test_an_absent_null_or_unmirrorable_argument_gets_no_header() -> None:
    """Spec: the header is omitted when the value is null or absent."""
    assert param_headers(SCHEMA, {"region": None}) == {}
    assert param_headers(SCHEMA, {"region": {"nested": 1}}) == {}
    assert param_headers(None, {"region": "eu"}) == {}
    assert param_headers({"properties": "nonsense"}, {"region": "eu"}) == {}


@pytest.mark.parametrize("value", ["Zürich", " padded", "line\nbreak", "=?base64?x?="])
def test_a_value_that_is_not_plain_goes_in_the_base64_sentinel(value: str) -> None:
    (sent,) = param_headers(SCHEMA, {"region": value}).values()
    assert sent == header_value(value) != value


def _proto(clients: Clients, arguments: dict[str, Any]) -> McpTasks:
    remote = Remote("peer", URL)
    transport = Transport(remote, clients.get(), "work", clients.tool_lists)
    return McpTasks(remote, transport, "work", arguments, None)


async def test_the_tool_list_is_read_once_and_its_schema_mirrors_the_arguments() -> None:
    fake = FakeRemote({"tools/list": [LISTED], "tools/call": [CREATED]})
    clients = Clients()
    with fake.mounted():
        for region in ("eu", "us"):
            created = await _proto(clients, {"region": region}).create("k")
            assert created.task is not None
    assert len(fake.calls("tools/list")) == 1
    assert [h.get("mcp-param-region") for h in fake.headers("tools/call")] == ["eu", "us"]


async def test_a_call_refused_for_a_header_reads_the_list_again_and_is_sent_again_once() -> None:
    """Our choice: a HeaderMismatch is a refusal before the tool ran, so the same create
    (same key) goes again once the schema is read anew."""
    old = {**LISTED, "tools": [{"name": "work", "inputSchema": {"type": "object"}}]}
    fake = FakeRemote({"tools/list": [old, LISTED], "tools/call": [MISMATCH, CREATED]})
    clients = Clients()
    with fake.mounted():
        created = await _proto(clients, {"region": "eu"}).create("k")
    assert created.task is not None
    assert len(fake.calls("tools/list")) == 2
    sent = fake.headers("tools/call")
    assert [h.get("mcp-param-region") for h in sent] == [None, "eu"]
    assert {h["idempotency-key"] for h in sent} == {"k"}


async def test_a_call_refused_again_for_a_header_is_a_protocol_error() -> None:
    fake = FakeRemote({"tools/list": [LISTED], "tools/call": [MISMATCH]})
    with fake.mounted(), pytest.raises(RemoteProtocolError) as caught:
        await _proto(Clients(), {"region": "eu"}).create("k")
    assert caught.value.code == -32020
    assert len(fake.calls("tools/call")) == 2


async def test_a_remote_without_a_tool_list_is_called_without_headers_and_not_asked_again() -> None:
    """Our choice: a refused tools/list is taken as empty for a while; a call it refuses
    for a header then fails at once (reading the list again would tell nothing)."""
    fake = FakeRemote({"tools/call": [CREATED, MISMATCH]})  # tools/list: not found
    clients = Clients()
    with fake.mounted():
        created = await _proto(clients, {"region": "eu"}).create("k")
        assert created.task is not None
        with pytest.raises(RemoteProtocolError):
            await _proto(clients, {"region": "eu"}).create("k2")
    assert len(fake.calls("tools/list")) == 1
    assert [h.get("mcp-param-region") for h in fake.headers("tools/call")] == [None, None]


async def test_a_tool_list_unreachable_for_now_does_not_hold_the_call_and_is_read_next_time() -> (
    None
):
    """Our choice: the create is not held back by a list that failed in transit (its own
    failure, if the remote is down, is retried as any other); nothing is kept of it."""
    fake = FakeRemote({"tools/list": [httpx.Response(503), LISTED], "tools/call": [CREATED]})
    clients = Clients()
    with fake.mounted():
        for _ in range(2):
            await _proto(clients, {"region": "eu"}).create("k")
    assert len(fake.calls("tools/list")) == 2
    assert [h.get("mcp-param-region") for h in fake.headers("tools/call")] == [None, "eu"]
