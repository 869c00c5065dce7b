"""A workflow served as one tool (`Exposure(tool=True)`), called by a client without the Tasks
extension: the call returns as soon as the run waits for an answer (the tool error
`input_required`, with the handle and the call that answers it) instead of holding the request
until the sync limit. Our choice (docs/workflows.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.e2e.conftest import ServeFn
from tests.mcp_client import McpClient
from tether import Exposure
from tether.runtime.context import Context
from tether.runtime.registry import App
from tether.runtime.waits import Approved

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

PLAIN: dict[str, Any] = {}  # a client with no Tasks extension and no elicitation
HOUR = 3600.0  # the sync limit: a call that waited for it would outlast the test's bound

app = App("tool-waits")


@app.workflow(expose=Exposure(tool=True, tool_set=True))
async def publish(ctx: Context) -> dict[str, Any]:
    """Ask for an approval, then say what was decided."""
    decision = await ctx.approval("go", prompt="Publish?", inputs=["ticket"], required=["ticket"])
    return {"approved": isinstance(decision, Approved)}


@app.workflow(expose=Exposure(tool=True))
async def ask(ctx: Context) -> str:
    """Wait for a signal; served by its one tool only (no answer tool)."""
    return str(await ctx.wait_for_signal("reply", prompt="Say something"))


async def call(c: McpClient, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with asyncio.timeout(30):  # far below the sync limit
        return await c.result(
            "tools/call", {"name": name, "arguments": arguments}, capabilities=PLAIN
        )


def tool_error(result: dict[str, Any]) -> dict[str, Any]:
    assert result["isError"] is True, result
    error: dict[str, Any] = result["structuredContent"]["error"]
    return error


async def test_a_workflow_tool_returns_when_its_run_waits_with_the_answer_call(
    mcp_server: ServeFn,
) -> None:
    """The call comes back while the run waits, naming the handle and the `answer_<wf>` call;
    made as given (with the ticket filled in) it lets the run finish."""
    async with mcp_server(app, sync_limit_s=HOUR) as url:
        c = McpClient(url)
        try:
            waited = tool_error(await call(c, "publish", {}))
            assert waited["code"] == "input_required"
            handle = waited["handle"]
            (wait,) = waited["waits"]
            assert (wait["kind"], wait["name"]) == ("approval", "go")
            answer = wait["answer_with"]
            assert answer["tool"] == "answer_publish" and answer["arguments"]["handle"] == handle
            assert "answer_publish" in waited["message"]
            arguments = {**answer["arguments"], "response": {"decision": "approve", "ticket": "T"}}
            accepted = await call(c, "answer_publish", arguments)
            assert accepted["structuredContent"]["status"] == "accepted", accepted
            watched = await call(c, "publish_watch", {"handle": handle, "timeout_seconds": 30})
            assert watched["structuredContent"]["output"] == {"approved": True}
        finally:
            await c.aclose()


async def test_a_workflow_tool_without_an_answer_tool_names_the_command_that_answers(
    mcp_server: ServeFn,
) -> None:
    """With no answer tool served, the returned wait says how a person answers it."""
    async with mcp_server(app, sync_limit_s=HOUR) as url:
        c = McpClient(url)
        try:
            waited = tool_error(await call(c, "ask", {}))
        finally:
            await c.aclose()
    assert waited["code"] == "input_required"
    (wait,) = waited["waits"]
    assert wait["name"] == "reply" and "answer_with" not in wait
    assert f"tether runs answer {waited['execution_id']} reply" in waited["message"]
