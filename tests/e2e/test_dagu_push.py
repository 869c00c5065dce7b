"""`dagu://runs/…` subscriptions over real HTTP: a `subscriptions/listen` stream with
`resourceSubscriptions` gets one `notifications/resources/updated` at each waiting checkpoint
(an approval gate, a human task) and one at the terminal state, and nothing for the steps in
between."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.e2e.conftest import ServeFn
from tests.e2e.test_dagu_execute import PLAIN, execute, ok
from tests.mcp_client import McpClient
from tests.sse import listen
from tether.runtime.registry import App

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]
SUB = "io.modelcontextprotocol/subscriptionId"

TWO_STOPS = """
name: twostops
steps:
  - name: hold
    command: "while [ ! -f {marker} ]; do sleep 0.02; done"
  - name: between
    command: "echo between"
    depends: hold
  - name: first
    command: "echo first"
    depends: between
    approval: {prompt: "First?"}
  - name: middle
    command: "echo middle"
    depends: first
  - id: second
    action: human.task
    depends: middle
    with: {prompt: "Second?"}
  - name: last
    command: "echo last"
    depends: second
"""


async def read_run(c: McpClient, uri: str) -> dict[str, Any]:
    read = await c.result("resources/read", {"uri": uri}, capabilities=PLAIN)
    out: dict[str, Any] = orjson.loads(read["contents"][0]["text"])
    return out


def waiting(run: dict[str, Any]) -> list[str]:
    return [s["name"] for s in run["steps"] if s["statusLabel"] == "waiting"]


async def test_a_run_uri_subscription_is_told_of_each_checkpoint_and_the_end(
    mcp_server: ServeFn, client: Callable[[str], McpClient], tmp_path: Path
) -> None:
    marker = tmp_path / "go"
    app = App()
    app.dag(TWO_STOPS.replace("{marker}", str(marker)))
    async with mcp_server(app) as url:
        c = client(url)
        started = ok(await execute(c, action="start", name="twostops", dagRunId="p-1"))
        uri = started["runUri"]
        async with listen(c, {"resourceSubscriptions": [uri]}) as stream:
            ack = await stream.next()
            assert ack["params"]["notifications"] == {"resourceSubscriptions": [uri]}
            updated = {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": uri, "_meta": {SUB: 40}},
            }
            marker.write_text("x")  # hold ends; `between` runs; the gate opens
            assert await stream.next() == updated
            first = await read_run(c, uri)
            assert (first["statusLabel"], waiting(first)) == ("waiting", ["first"])
            base = {"name": "twostops", "dagRunId": "p-1"}
            ok(await execute(c, action="approve", stepName="first", **base))
            assert await stream.next() == updated  # `middle` ran; the human task waits
            second = await read_run(c, uri)
            assert (second["statusLabel"], waiting(second)) == ("waiting", ["second"])
            ok(await execute(c, action="approve", stepName="second", **base))
            assert await stream.next() == updated  # `last` ran; the run ended
            assert (await read_run(c, uri))["statusLabel"] == "succeeded"
            rest = await stream.rest()
    # nothing else: the stream ends with its result once its only resource has ended
    assert [m for m in rest if m.get("method")] == []
    assert rest and rest[-1]["id"] == 40 and "result" in rest[-1]


async def test_the_subscribe_guidance_names_the_method_this_revision_serves(
    mcp_server: ServeFn, client: Callable[[str], McpClient]
) -> None:
    """A reply's `subscribe` guidance points at `subscriptions/listen` with the run URI (the
    2026-07-28 way; `resources/subscribe` is gone and answers -32601), and `server/discover`
    says resources can be followed that way."""
    app = App()
    app.dag("name: quick\nsteps:\n  - name: one\n    command: echo one\n")
    async with mcp_server(app) as url:
        c = client(url)
        started = ok(await execute(c, action="start", name="quick", dagRunId="s-1"))
        guidance = started["subscribe"]
        assert "subscriptions/listen" in guidance and "resourceSubscriptions" in guidance
        assert "resources/subscribe" not in guidance
        discovered = await c.result("server/discover", {}, capabilities=PLAIN)
        resources = discovered["capabilities"]["resources"]
        assert resources == {"subscribe": True, "listChanged": False}
        removed = await c.call("resources/subscribe", {"uri": started["runUri"]})
        assert removed["error"]["code"] == -32601
