"""A workflow drives a FastMCP tasks server's task (`fastmcp[tasks]`, the version the lock
installs) over loopback HTTP: another implementation of the Tasks extension than Tether's.
Its tasks live in memory, so a restart loses them: the call reports RemoteTaskLost."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from pydantic import BaseModel

from tests.apps import fastmcp_remote
from tests.e2e.conftest import free_port, serve
from tests.e2e.remotes import Process, completed, remote_task
from tests.mcp_client import McpClient
from tether.runtime.context import Context
from tether.runtime.exposure import Exposure
from tether.runtime.operations import Operations
from tether.runtime.policy import RetryPolicy
from tether.runtime.registry import App
from tether.runtime.remote.errors import RemoteError

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.e2e,
    pytest.mark.upstream(
        "These tests pin what fastmcp's tasks server does at the version requirements/lock.txt "
        "installs. If the lock changed, read what the server answered and decide whether "
        "Tether or the test is wrong; update the test and docs/remote-tasks.md together."
    ),
]

TIMEOUT = 30
FAST = RetryPolicy(max_attempts=60, initial_interval=0.05, max_interval=0.3)


class Call(BaseModel):
    remote: str = "fm"
    tool: str
    arguments: dict[str, Any] = {}


def requester(url: str) -> App:
    app = App("requester")
    # FastMCP asks for 5 s between polls; the remote's bounds keep the test quick.
    app.remote("fm", url=url, poll_min=0.05, poll_max=0.2, retry=FAST)
    app.remote("fm_plain", url=url, protocol="mcp", retry=FAST)

    @app.workflow(expose=Exposure(tool_set=True))
    async def relay(ctx: Context, call: Call) -> dict[str, Any]:
        try:
            value = await ctx.call_tool(call.remote, call.tool, call.arguments)
        except RemoteError as exc:
            return {"error": type(exc).__name__, "message": str(exc), **exc.extra()}
        return {"value": value}

    return app


@pytest.fixture
async def fastmcp(tmp_path: Path) -> AsyncIterator[Process]:
    """FastMCP's server in a process of its own (its backend's worker with it)."""
    async with Process("tests/apps/fastmcp_remote.py", free_port(), tmp_path).running() as found:
        yield found


async def test_a_fastmcp_task_completes_with_its_structured_result(
    fastmcp: Process, db_url: str, db: asyncpg.Pool
) -> None:
    """FastMCP wraps a plain return in `structuredContent: {"result": …}`."""
    app = requester(fastmcp.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = (
            await ops.start("relay", {"tool": "add", "arguments": {"a": 2, "b": 3}})
        ).execution.id
        assert await completed(ops, run) == {"value": {"result": 5}}


async def test_a_fastmcp_tool_error_and_protocol_error_are_told_apart(
    fastmcp: Process, db_url: str, db: asyncpg.Pool
) -> None:
    """Spec (Tasks): a raised tool error completes with isError; an MCPError is `failed`."""
    app = requester(fastmcp.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        boom = await ops.start("relay", {"tool": "boom", "arguments": {"reason": "bad disk"}})
        refuse = await ops.start("relay", {"tool": "refuse", "arguments": {"reason": "quota"}})
        tool_error = await completed(ops, boom.execution.id)
        protocol_error = await completed(ops, refuse.execution.id)
    assert tool_error["error"] == "RemoteToolError"
    assert tool_error["result"]["isError"] is True
    assert protocol_error["error"] == "RemoteProtocolError"
    assert protocol_error["code"] == fastmcp_remote.REFUSAL_CODE


async def test_a_fastmcp_question_is_answered_through_our_task_and_forwarded(
    fastmcp: Process, db_url: str, db: asyncpg.Pool
) -> None:
    """FastMCP's guard-pattern ask shows on our task; our tasks/update answers it; FastMCP
    runs the tool again with the answer."""
    app = requester(fastmcp.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url) as url:
        client = McpClient(url)
        try:
            run = (
                await ops.start("relay", {"tool": "ask", "arguments": {"question": "Name?"}})
            ).execution.id
            task = await client.wait_task(run, {"input_required"}, timeout=TIMEOUT)
            ((key, request),) = task["inputRequests"].items()
            assert request["params"]["message"] == "Name?"
            answer = {"action": "accept", "content": {"name": "Ada"}}
            await client.result("tasks/update", {"taskId": run, "inputResponses": {key: answer}})
            assert await completed(ops, run) == {"value": "hello Ada"}
        finally:
            await client.aclose()


async def test_cancelling_our_run_cancels_the_fastmcp_task(
    fastmcp: Process, db_url: str, db: asyncpg.Pool
) -> None:
    """Cancel travels to FastMCP: its task reads `cancelled` afterwards."""
    app = requester(fastmcp.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = (
            await ops.start("relay", {"tool": "nap", "arguments": {"seconds": 600}})
        ).execution.id
        task = await remote_task(ops, run)
        await ops.cancel(run)
        assert (await ops.wait_for_end(run, timeout=TIMEOUT)).current.status == "cancelled"
    client = McpClient(fastmcp.url)
    try:
        theirs = await client.wait_task(task, {"cancelled"}, timeout=TIMEOUT)
    finally:
        await client.aclose()
    assert theirs["status"] == "cancelled"
    notes = [e.data["outcome"] for e in await ops.history(run) if e.type == "remote_cancel"]
    assert notes == ["acknowledged"]


async def test_a_fastmcp_task_cancelled_on_its_side_raises_remote_cancelled(
    fastmcp: Process, db_url: str, db: asyncpg.Pool
) -> None:
    """Cancel the other way: FastMCP's task is cancelled by another client."""
    app = requester(fastmcp.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = (
            await ops.start("relay", {"tool": "nap", "arguments": {"seconds": 600}})
        ).execution.id
        task = await remote_task(ops, run)
        client = McpClient(fastmcp.url)
        try:
            await client.result("tasks/cancel", {"taskId": task})
        finally:
            await client.aclose()
        out = await completed(ops, run)
    assert out["error"] == "RemoteCancelled"


async def test_a_fastmcp_restart_loses_its_tasks_and_the_call_reports_the_task_lost(
    fastmcp: Process, db_url: str, db: asyncpg.Pool
) -> None:
    """Spec (Tasks): an unknown task id is -32602: the call ends RemoteTaskLost."""
    app = requester(fastmcp.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = (
            await ops.start("relay", {"tool": "nap", "arguments": {"seconds": 600}})
        ).execution.id
        await remote_task(ops, run)
        fastmcp.kill()
        await fastmcp.start()  # a new process: nothing of before
        out = await completed(ops, run)
    assert out["error"] == "RemoteTaskLost"


async def test_a_plain_mcp_remote_is_called_synchronously(
    fastmcp: Process, db_url: str, db: asyncpg.Pool
) -> None:
    """`protocol="mcp"`: no task, the tools/call result is the value."""
    app = requester(fastmcp.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        started = await ops.start(
            "relay", {"remote": "fm_plain", "tool": "shout", "arguments": {"text": "hi"}}
        )
        assert await completed(ops, started.execution.id) == {"value": {"result": "HI"}}
        (record,) = [s for s in await ops.steps(started.execution.id) if s.kind == "remote"]
    assert record.result == {"value": {"result": "HI"}}  # ended at once: no task recorded
