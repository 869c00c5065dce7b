"""A workflow drives another Tether server's task, durably, over loopback HTTP: both servers
are real, each on its own database, and every check of "exactly one remote task" reads the
remote's database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from pydantic import BaseModel

from tests.apps import remote_tools
from tests.e2e.conftest import serve
from tests.e2e.remotes import Peer, completed, peer
from tests.mcp_client import McpClient
from tether.runtime.context import Context
from tether.runtime.exposure import Exposure
from tether.runtime.operations import Operations
from tether.runtime.policy import RetryPolicy
from tether.runtime.registry import App
from tether.runtime.remote.errors import RemoteError
from tether.testing.databases import Databases

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

TIMEOUT = 30


class Call(BaseModel):
    tool: str
    arguments: dict[str, Any] = {}
    timeout: float | None = None


#: Fast retries: a remote that is down is tried again every few tenths of a second.
FAST = RetryPolicy(max_attempts=60, initial_interval=0.05, max_interval=0.3)


def requester(url: str) -> App:
    """Our side: `relay` calls the remote tool its input names and returns the value, or
    the error's type and fields."""
    app = App("requester")
    app.remote("peer", url=url, poll_min=0.05, retry=FAST)

    @app.workflow(expose=Exposure(tool_set=True))
    async def relay(ctx: Context, call: Call) -> dict[str, Any]:
        try:
            value = await ctx.call_tool("peer", call.tool, call.arguments, timeout=call.timeout)
        except RemoteError as exc:
            return {"error": type(exc).__name__, "message": str(exc), **exc.extra()}
        return {"value": value}

    return app


@pytest.fixture
async def remote(tether_databases: Databases) -> AsyncIterator[Peer]:
    async with peer(remote_tools.app, tether_databases) as found:
        yield found


async def _relay(ops: Operations, tool: str, **arguments: Any) -> str:
    started = await ops.start("relay", {"tool": tool, "arguments": arguments})
    return started.execution.id


async def test_a_remote_tool_returns_its_structured_result_from_one_remote_task(
    remote: Peer, db_url: str, db: asyncpg.Pool
) -> None:
    """Our choice: the value is the remote result's structuredContent; one run on the remote."""
    app = requester(remote.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = await _relay(ops, "echo", text="hi")
        assert await completed(ops, run) == {"value": {"echo": "hi"}}
    (only,) = await remote.runs("echo")
    assert only["status"] == "completed"
    (record,) = [s for s in await ops.steps(run) if s.kind == "remote"]
    assert record.done and record.name == "peer/echo"


async def test_a_tool_whose_argument_is_mirrored_in_a_header_is_called_with_that_header(
    remote: Peer, db_url: str, db: asyncpg.Pool
) -> None:
    """Spec (Streamable HTTP, SEP-2243): an `x-mcp-header` argument goes in its
    `Mcp-Param-*` header too (Base64 for a value that is not plain ASCII); the remote refuses
    a call without it."""
    app = requester(remote.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = await _relay(ops, "route", region="Zürich", text="hi")
        assert await completed(ops, run) == {"value": {"region": "Zürich", "text": "hi"}}
    (only,) = await remote.runs("route")
    assert only["status"] == "completed"


async def test_a_remote_tool_error_is_raised_as_a_tool_error(
    remote: Peer, db_url: str, db: asyncpg.Pool
) -> None:
    """Spec (Tasks): a tool that ran and failed is `completed` + isError: RemoteToolError."""
    app = requester(remote.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        out = await completed(ops, await _relay(ops, "fail", text="no such file"))
    assert out["error"] == "RemoteToolError"
    assert "no such file" in out["message"]
    assert out["result"]["isError"] is True


async def test_a_failed_remote_task_is_raised_as_a_protocol_error_with_its_code(
    remote: Peer, db_url: str, db: asyncpg.Pool
) -> None:
    """Spec (Tasks): `failed` carries a JSON-RPC error: RemoteProtocolError with its code."""
    app = requester(remote.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        out = await completed(ops, await _relay(ops, "refuse", text="over quota"))
    assert out["error"] == "RemoteProtocolError"
    assert out["code"] == remote_tools.REFUSAL_CODE
    assert out["data"] == {"why": "refused"}


async def test_a_remote_question_is_answered_by_a_person_through_our_task_update(
    remote: Peer, db_url: str, db: asyncpg.Pool
) -> None:
    """The remote's input request shows on our task under our key; our tasks/update answers
    it, the answer is forwarded once, and the remote finishes with it."""
    app = requester(remote.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url) as url:
        client = McpClient(url)
        try:
            run = await _relay(ops, "ask", question="Who are you?")
            task = await client.wait_task(run, {"input_required"}, timeout=TIMEOUT)
            ((key, request),) = task["inputRequests"].items()
            assert key.startswith(f"{run}:remote_input:peer/ask#")
            params = request["params"]
            assert params["message"] == "Who are you?"
            assert params["requestedSchema"]["properties"]["name"]["type"] == "string"
            answer = {"action": "accept", "content": {"name": "Ada"}}
            await client.result("tasks/update", {"taskId": run, "inputResponses": {key: answer}})
            assert await completed(ops, run) == {"value": {"greeting": "hello Ada"}}
        finally:
            await client.aclose()
    (only,) = await remote.runs("ask")
    assert only["status"] == "completed"
    forwarded = [e for e in await ops.history(run) if e.type == "remote_answered"]
    assert [e.data["keys"] for e in forwarded] == [[key]]


async def _parked(ops: Operations, run: str, *, kind: str | None = None) -> list[dict[str, Any]]:
    """The run's open waits once it is parked on one (of `kind`), or parked at all."""
    async with asyncio.timeout(TIMEOUT):
        while True:
            row = (await ops.get(run)).current
            if row.status == "waiting" and (
                kind is None or any(w["kind"] == kind for w in row.waits)
            ):
                return list(row.waits)
            await asyncio.sleep(0.02)


async def test_a_question_the_remote_asks_before_its_task_is_answered_through_our_run(
    remote: Peer, db_url: str, db: asyncpg.Pool
) -> None:
    """Spec (MRTR, then Tasks): the remote's tools/call answers input_required before it
    creates anything; our run waits on it as on a task's question, and the create carrying
    the answer and the requestState starts the remote's one task."""
    app = requester(remote.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = await _relay(ops, "confirm_echo", text="hi")
        (wait,) = await _parked(ops, run, kind="remote_input")
        assert wait["schema"] == remote_tools.GO_FORM
        assert await remote.runs("echo") == []
        await ops.answer(run, wait["key"], {"ok": True})
        assert await completed(ops, run) == {"value": {"echo": "hi:True"}}
    (only,) = await remote.runs("echo")
    assert only["status"] == "completed"
    forwarded = [e.data["keys"] for e in await ops.history(run) if e.type == "remote_answered"]
    assert forwarded == [[wait["key"]]]


async def test_a_remote_that_asks_again_gets_a_new_key_answered_through_the_answer_tool(
    remote: Peer, db_url: str, db: asyncpg.Pool
) -> None:
    """Spec (Tasks): keys are unique over a task's life; our second question has a new key,
    and the answer tool answers it like tasks/update (by the wait's name)."""
    app = requester(remote.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url) as url:
        run = await _relay(ops, "ask", question="Name?", times=2)
        (first,) = await _parked(ops, run, kind="remote_input")
        await ops.answer(run, first["key"], {"name": "Ada"})
        async with asyncio.timeout(TIMEOUT):
            while True:
                waits = await _parked(ops, run, kind="remote_input")
                if waits[0]["key"] != first["key"]:
                    break
                await asyncio.sleep(0.02)
        (second,) = waits
        assert second["name"] != first["name"]
        client = McpClient(url)
        try:
            body = await client.result(
                "tools/call",
                {
                    "name": "answer_relay",
                    "arguments": {
                        "handle": run,
                        "wait": second["name"],
                        "response": {"name": "Bo"},
                    },
                },
            )
            assert body.get("isError") is not True, body
        finally:
            await client.aclose()
        assert await completed(ops, run) == {"value": {"greeting": "hello Ada and Bo"}}
    forwarded = [e.data["keys"] for e in await ops.history(run) if e.type == "remote_answered"]
    assert forwarded == [[first["key"]], [second["key"]]]


async def test_cancelling_our_run_cancels_the_remote_task_once(
    remote: Peer, db_url: str, db: asyncpg.Pool
) -> None:
    """Cancel travels: tasks/cancel reaches the remote (its run ends cancelled), is sent once,
    and its acknowledgement is noted in our history."""
    app = requester(remote.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = await _relay(ops, "hold", text="x")
        theirs = await remote.one_run("hold")
        await _parked(ops, run)
        await ops.cancel(run, reason="changed my mind")
        view = await ops.wait_for_end(run, timeout=TIMEOUT)
        assert view.current.status == "cancelled"
        ended = await remote.ops.wait_for_end(theirs, timeout=TIMEOUT)
        assert ended.current.status == "cancelled"
    notes = [e.data for e in await ops.history(run) if e.type == "remote_cancel"]
    assert [(n["outcome"], n["reason"]) for n in notes] == [("acknowledged", "cancelled")]
    assert len(await remote.runs("hold")) == 1


async def test_a_remote_task_cancelled_on_its_side_raises_remote_cancelled(
    remote: Peer, db_url: str, db: asyncpg.Pool
) -> None:
    """Spec (Tasks): a `cancelled` task ends the call with RemoteCancelled."""
    app = requester(remote.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = await _relay(ops, "hold", text="x")
        theirs = await remote.one_run("hold")
        await _parked(ops, run)
        await remote.ops.cancel(theirs)
        out = await completed(ops, run)
    assert out["error"] == "RemoteCancelled"


async def test_a_remote_restart_mid_task_is_waited_out_and_the_same_task_finishes(
    remote: Peer, db_url: str, db: asyncpg.Pool
) -> None:
    """Transport errors while the remote is down are retried with backoff; once it is back,
    polling resumes on the same task, and the remote holds one run."""
    app = requester(remote.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = await _relay(ops, "hold", text="restart")
        theirs = await remote.one_run("hold")
        await _parked(ops, run)
        await remote.stop()
        async with asyncio.timeout(TIMEOUT):  # a poll failed: the call backs off
            while True:
                (record,) = [s for s in await ops.steps(run) if s.kind == "remote"]
                if record.result.get("failures", 0) >= 1:
                    break
                await asyncio.sleep(0.02)
        await remote.start()
        await remote.ops.signal(theirs, "release")
        assert await completed(ops, run) == {"value": {"released": "restart"}}
    assert len(await remote.runs("hold")) == 1


async def test_a_call_past_its_timeout_cancels_the_remote_task_and_raises_remote_timeout(
    remote: Peer, db_url: str, db: asyncpg.Pool
) -> None:
    """Our choice: a call's `timeout` bounds the whole call; the remote task is cancelled."""
    app = requester(remote.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        started = await ops.start(
            "relay", {"tool": "hold", "arguments": {"text": "slow"}, "timeout": 0.5}
        )
        out = await completed(ops, started.execution.id)
        assert out["error"] == "RemoteTimeout"
        theirs = await remote.one_run("hold")
        ended = await remote.ops.wait_for_end(theirs, timeout=TIMEOUT)
        assert ended.current.status == "cancelled"
