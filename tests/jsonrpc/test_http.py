"""The Streamable HTTP endpoint (`tether.jsonrpc.http`), called as the ASGI app it is: how
a request's handling shares the event loop with other work."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from starlette.types import Message

from tether.jsonrpc import codes
from tether.jsonrpc.http import LARGE_BODY_BYTES, McpEndpoint
from tether.jsonrpc.router import RequestContext, Router

SCOPE = {
    "type": "http",
    "method": "POST",
    "headers": [
        (b"content-type", b"application/json"),
        (codes.H_PROTOCOL_VERSION.encode(), codes.LEGACY_VERSIONS[0].encode()),
    ],
}


@pytest.mark.parametrize(
    ("pad", "order"),
    [(LARGE_BODY_BYTES, ["other", "handled"]), (16, ["handled", "other"])],
)
async def test_a_large_body_is_decoded_on_one_turn_of_the_loop_and_handled_on_another(
    pad: int, order: list[str]
) -> None:
    """Our choice: work that became ready while a large body was decoded runs before the
    request goes on; a small body is handled on the turn it arrived."""
    happened: list[str] = []

    async def echo(ctx: RequestContext) -> dict[str, Any]:
        happened.append("handled")
        return {}

    router = Router()
    router.add("echo", echo, eras=("legacy",))
    request = {"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"pad": "x" * pad}}
    body = orjson.dumps(request)

    async def receive() -> Message:  # the whole body at once, without waiting
        return {"type": "http.request", "body": body, "more_body": False}

    async def other() -> None:
        happened.append("other")

    ready = asyncio.create_task(other())  # ready to run at the loop's next turn
    await McpEndpoint(router).respond(SCOPE, receive)
    await ready
    assert happened == order
