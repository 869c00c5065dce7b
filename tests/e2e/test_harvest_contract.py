"""Rules of Harvest's MCP tool contract (docs/clients.md, "Coming from Harvest's MCP tools") that
the conformance checklist does not state, over real HTTP: the cache hints of server/discover
and tools/list, the start key of a task create, the failure an update tool returns, and the
frames of a watch."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import orjson
import pytest
from pydantic import BaseModel

from tests.conftest import direct_url
from tests.e2e.conftest import ServeFn
from tests.mcp_client import CAPS_TASKS, McpClient, meta
from tests.sse import Stream
from tether.jsonrpc import codes
from tether.runtime.context import Context
from tether.runtime.exposure import Exposure
from tether.runtime.registry import App

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

HARVEST_KEY = "io.autumn-harvest/idempotencyKey"
TETHER_KEY = "dev.tether/idempotencyKey"


class Review(BaseModel):
    title: str


class Days(BaseModel):
    days: int


app = App("harvest-contract")


@app.workflow(expose=Exposure(tool_set=True))
async def review(ctx: Context, req: Review) -> str:
    await ctx.wait_for_signal("approve")
    return req.title


@app.update("review", mcp=True)
async def explode(ctx: Context, d: Days) -> str:
    raise RuntimeError("handler exploded")


@app.workflow(expose=Exposure(tool_set=True))
async def staged(ctx: Context, d: Days) -> dict[str, int]:
    await ctx.set_details("step 1/2: fetch")
    await ctx.sleep(0.3)
    await ctx.set_details("step 2/2: store")
    if d.days < 0:
        raise ValueError("no negative days")
    return {"days": d.days}


async def create(
    c: McpClient, *, headers: dict[str, str] | None = None, **meta_keys: Any
) -> dict[str, Any]:
    """tools/call start_review with the Tasks extension; the JSON-RPC response body."""
    params = {
        "name": "start_review",
        "arguments": {"body": {"title": "T"}},
        "_meta": meta(CAPS_TASKS, **meta_keys),
    }
    return await c.call("tools/call", params, headers=headers)


async def runs(db_url: str) -> int:
    conn = await asyncpg.connect(direct_url(db_url))
    try:
        count: int = await conn.fetchval("SELECT count(*) FROM executions")
        return count
    finally:
        await conn.close()


async def test_discover_and_tools_list_are_private_for_sixty_seconds(
    mcp_server: ServeFn, client: Any
) -> None:
    """Harvest's contract: server/discover and tools/list are cacheable for 60 s with a private
    scope, and discovery's _meta holds the server identity."""
    async with mcp_server(app) as url:
        c = client(url)
        discover = await c.result("server/discover", capabilities={})
        tools = await c.result("tools/list", capabilities={})
        for result in (discover, tools):
            assert (result["ttlMs"], result["cacheScope"]) == (60_000, "private"), result
        assert discover["_meta"][codes.META_SERVER_INFO]["name"]


async def test_a_retried_create_with_a_start_key_gets_the_same_task(
    mcp_server: ServeFn, client: Any, db_url: str
) -> None:
    """Harvest's crash-safe create: the key rides in the Idempotency-Key header or in `_meta`
    (Harvest's io.autumn-harvest/idempotencyKey is honoured beside ours); the header wins; no
    key starts a new run each time; a key that is not a string is refused (-32602) and starts
    nothing."""
    async with mcp_server(app) as url:
        c = client(url)

        async def task_id(**kw: Any) -> str:
            body = await create(c, **kw)
            assert body["result"]["resultType"] == "task", body
            tid: str = body["result"]["taskId"]
            return tid

        harvest = await task_id(**{HARVEST_KEY: "h-1"})
        assert await task_id(**{HARVEST_KEY: "h-1"}) == harvest
        ours = await task_id(**{TETHER_KEY: "t-1"})
        assert ours != harvest
        assert await task_id(headers={"Idempotency-Key": "t-1"}, **{HARVEST_KEY: "h-1"}) == ours
        assert await task_id() != await task_id()
        before = await runs(db_url)
        bad_keys: list[Any] = [7, "", None]
        for bad in bad_keys:
            body = await create(c, headers=None, **{HARVEST_KEY: bad})
            assert body["error"]["code"] == codes.INVALID_PARAMS, body
            assert HARVEST_KEY in body["error"]["message"]
        assert await runs(db_url) == before


async def test_an_update_handler_failure_is_returned_in_words(
    mcp_server: ServeFn, client: Any
) -> None:
    """Harvest's generated tools: a handler that fails records a failure, and the tool returns
    that failure: `Type: message`, with the record itself in structuredContent."""
    async with mcp_server(app) as url:
        c = client(url)
        call = {"name": "start_review", "arguments": {"body": {"title": "T"}}}
        started = await c.result("tools/call", call, capabilities={})
        handle = started["structuredContent"]["execution_id"]
        async with asyncio.timeout(10):
            while True:
                status = await c.result(
                    "tools/call",
                    {"name": "review_status", "arguments": {"handle": handle}},
                    capabilities={},
                )
                if status["structuredContent"]["state"] == "waiting":
                    break
                await asyncio.sleep(0.02)
        update = {
            "name": "review_update_explode",
            "arguments": {"handle": handle, "input": {"days": 1}},
        }
        result = await c.result("tools/call", update, capabilities={})
        assert result["isError"] is True
        error = result["structuredContent"]["error"]
        assert error["code"] == "update_failed"
        assert error["message"] == "update 'explode' failed: RuntimeError: handler exploded"
        assert error["update_error"] == {"type": "RuntimeError", "message": "handler exploded"}


async def call(c: McpClient, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tools/call without the Tasks extension; its structuredContent."""
    result = await c.result("tools/call", {"name": tool, "arguments": arguments}, capabilities={})
    out: dict[str, Any] = result["structuredContent"]
    return out


async def watch(c: McpClient, handle: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """staged_watch with a progress token: (progress notification params, the result)."""
    params = {
        "name": "staged_watch",
        "arguments": {"handle": handle},
        "_meta": {**meta({}), "progressToken": "tok"},
    }
    body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}
    headers = c.headers("tools/call", params)
    async with c.http.stream("POST", c.url, content=orjson.dumps(body), headers=headers) as resp:
        if resp.headers["content-type"].startswith("application/json"):
            messages = [orjson.loads(await resp.aread())]  # nothing was streamed first
        else:
            messages = await Stream(resp).rest(timeout=10)
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert messages[-1]["id"] == 9, messages
    return progress, messages[-1]["result"]["structuredContent"]


async def test_a_watch_reports_progress_then_the_terminal_frame_state_output_error(
    mcp_server: ServeFn, client: Any
) -> None:
    """Harvest's streaming progress: progress frames carry a number and `current_details | state`;
    the terminal frame `{state, output, error}` is the tools/call result, with no progress
    frame for the end. The status tool names them the same (the state, output and error of the
    run's eventual successor), and so does the start tool."""
    async with mcp_server(app) as url:
        c = client(url)
        started = await call(c, "start_staged", body={"days": 2})
        assert started["state"] in ("pending", "running"), started
        progress, result = await watch(c, started["execution_id"])
        status = await call(c, "staged_status", handle=started["execution_id"])
    numbers = [p["progress"] for p in progress]
    assert numbers == list(range(1, len(numbers) + 1)) and numbers, progress
    assert {p["progressToken"] for p in progress} == {"tok"}
    messages = [p["message"] for p in progress]
    assert "step 1/2: fetch" in messages, messages  # current_details once set, else the state
    assert not set(messages) & {"completed", "failed", "cancelled"}, messages
    frame = {k: result[k] for k in ("state", "output", "error")}
    assert frame == {"state": "completed", "output": {"days": 2}, "error": None}, result
    assert "status" not in result and "status" not in status and "status" not in started
    assert {k: status[k] for k in ("state", "output", "error")} == frame


async def test_an_ended_run_yields_the_result_frame_at_once(
    mcp_server: ServeFn, client: Any
) -> None:
    """Harvest's contract: a run that has already ended yields its result frame at once (no
    progress frame first); a failed run's frame has a null output and its error in words, a
    string as Harvest's is (its record beside it, in `error_details`)."""
    async with mcp_server(app) as url:
        c = client(url)
        handle = (await call(c, "start_staged", body={"days": -1}))["execution_id"]
        async with asyncio.timeout(10):
            while True:
                if (await call(c, "staged_status", handle=handle))["state"] == "failed":
                    break
                await asyncio.sleep(0.05)
        progress, result = await watch(c, handle)
    assert progress == []
    frame = (result["state"], result["output"], result["error"])
    assert frame == ("failed", None, "ValueError: no negative days"), result  # a string
    assert result["error_details"]["message"] == "no negative days"
