"""Pushed task views over `subscriptions/listen` and watches that outlast sleeps, end to end
over a real socket (spec: the Tasks extension's status notifications; our choices:
mcp/subscriptions.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from tests.apps.push import app
from tests.e2e.conftest import ServeFn, Workers, wait_exit
from tests.mcp_client import McpClient, meta
from tests.sse import Stream, listen

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

SUB = "io.modelcontextprotocol/subscriptionId"
APPROVE = {"action": "accept", "content": {"decision": "approve"}}


async def start(c: McpClient, workflow: str, body: dict[str, Any]) -> str:
    created = await c.result(
        "tools/call", {"name": f"start_{workflow}", "arguments": {"body": body}}
    )
    assert created["resultType"] == "task", created
    return str(created["taskId"])


def polled(task: dict[str, Any]) -> dict[str, Any]:
    """A tasks/get result as a notification carries it (no resultType, no _meta)."""
    return {k: v for k, v in task.items() if k not in ("resultType", "_meta")}


def pushed(frame: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in frame["params"].items() if k != "_meta"}


async def test_ack_first_then_current_view_then_each_change_until_the_end(
    mcp_server: ServeFn, client: Callable[[str], McpClient]
) -> None:
    """The ack lists only the agreed ids (an unknown one is left out); the current view
    follows; each change is one frame equal to tasks/get; the final view ends the stream."""
    async with mcp_server(app) as url:
        c = client(url)
        task_id = await start(c, "gated", {"title": "ship"})
        await c.wait_task(task_id, {"input_required"})
        async with listen(c, {"taskIds": [task_id, "ex_nosuchtask"]}) as stream:
            ack = await stream.next()
            assert ack == {
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {"_meta": {SUB: 40}, "notifications": {"taskIds": [task_id]}},
            }
            first = await stream.next()
            assert first["method"] == "notifications/tasks"
            assert first["params"]["_meta"] == {SUB: 40}
            assert pushed(first) == polled(await c.result("tasks/get", {"taskId": task_id}))
            (key,) = first["params"]["inputRequests"]
            await c.result("tasks/update", {"taskId": task_id, "inputResponses": {key: APPROVE}})
            rest = await stream.rest()
        final = polled(await c.result("tasks/get", {"taskId": task_id}))
    frames = [m for m in rest if m.get("method")]
    assert {m["method"] for m in frames} == {"notifications/tasks"}
    assert [pushed(m)["status"] for m in frames][-1] == "completed"
    assert pushed(frames[-1]) == final
    views = [tuple(pushed(m).get(k) for k in ("status", "statusMessage")) for m in frames]
    assert len(views) == len(set(views)), "an unchanged view was sent again"
    end = rest[-1]
    assert end["id"] == 40 and end["result"]["resultType"] == "complete"
    assert end["result"]["_meta"][SUB] == 40


async def test_concurrent_runs_are_reported_in_order_each_ending_with_its_final_view(
    mcp_server: ServeFn, client: Callable[[str], McpClient]
) -> None:
    """Five runs that sleep and finish at once: each task's frames go working → completed,
    and its last frame is what tasks/get returns."""
    async with mcp_server(app) as url:
        c = client(url)
        ids = [await start(c, "napper", {"seconds": 0.2, "naps": 2}) for _ in range(5)]
        async with listen(c, {"taskIds": ids}) as stream:
            ack = await stream.next()
            assert ack["params"]["notifications"]["taskIds"] == ids
            messages = await stream.rest()
        finals = {i: polled(await c.result("tasks/get", {"taskId": i})) for i in ids}
    by_task: dict[str, list[dict[str, Any]]] = {i: [] for i in ids}
    for m in messages:
        if m.get("method") == "notifications/tasks":
            by_task[m["params"]["taskId"]].append(pushed(m))
    for task_id, frames in by_task.items():
        statuses = [f["status"] for f in frames]
        assert statuses[-1] == "completed" and "completed" not in statuses[:-1], statuses
        assert frames[-1] == finals[task_id]
        stamps = [f["lastUpdatedAt"] for f in frames]
        assert stamps == sorted(stamps)


async def test_a_change_written_by_another_process_reaches_the_subscriber(
    mcp_server: ServeFn, client: Callable[[str], McpClient], workers: Workers
) -> None:
    """`tether runs answer` in a separate process answers the approval; the subscriber of
    this server hears the change (LISTEN/NOTIFY), up to the completed view."""
    async with mcp_server(app) as url:
        c = client(url)
        task_id = await start(c, "gated", {"title": "remote"})
        await c.wait_task(task_id, {"input_required"})
        async with listen(c, {"taskIds": [task_id]}) as stream:
            await stream.next()  # ack
            assert (await stream.next())["params"]["status"] == "input_required"
            cli = workers.spawn(
                "answer", "runs", "--app", "tests/apps/push.py:app",
                "answer", task_id, "go", '{"decision": "approve"}',
            )  # fmt: skip
            assert await wait_exit(cli, 60) == 0, workers.log("answer")
            rest = await stream.rest(timeout=30)
    assert [m["params"]["status"] for m in rest if m.get("method")][-1] == "completed"


async def test_a_dropped_stream_loses_nothing_the_next_listen_starts_with_the_current_view(
    mcp_server: ServeFn, client: Callable[[str], McpClient]
) -> None:
    """Disconnect, let the task change, listen again: the current view comes first."""
    async with mcp_server(app) as url:
        c = client(url)
        task_id = await start(c, "gated", {"title": "later"})
        await c.wait_task(task_id, {"input_required"})
        async with listen(c, {"taskIds": [task_id]}) as stream:
            await stream.next()
            first = await stream.next()
        (key,) = first["params"]["inputRequests"]
        await c.result("tasks/update", {"taskId": task_id, "inputResponses": {key: APPROVE}})
        final = polled(await c.wait_task(task_id, {"completed"}))
        async with listen(c, {"taskIds": [task_id]}, request_id=41) as stream:
            ack = await stream.next()
            again = await stream.next()
            end = await stream.next()
    assert ack["params"]["notifications"] == {"taskIds": [task_id]}
    assert pushed(again) == final and again["params"]["_meta"] == {SUB: 41}
    assert end["id"] == 41 and "result" in end


async def test_listen_refusals_are_json_errors_before_any_stream(
    mcp_server: ServeFn, client: Callable[[str], McpClient]
) -> None:
    """-32021 for taskIds without the extension; -32602 past the id cap; -31010 past the
    open-subscription cap; -32600 when the client does not take SSE."""
    async with mcp_server(app, max_subscription_ids=2, max_subscriptions=1) as url:
        c = client(url)
        task_id = await start(c, "gated", {"title": "caps"})
        no_ext = await c.request(
            "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}, capabilities={}
        )
        assert no_ext.status_code == 400 and no_ext.json()["error"]["code"] == -32021
        many = await c.call("subscriptions/listen", {"notifications": {"taskIds": ["a", "b", "c"]}})
        assert many["error"]["code"] == -32602
        json_only = await c.request(
            "subscriptions/listen",
            {"notifications": {"taskIds": [task_id]}},
            headers={"Accept": "application/json"},
        )
        assert json_only.json()["error"]["code"] == -32600
        async with listen(c, {"taskIds": [task_id]}) as stream:
            await stream.next()
            second = await c.request(
                "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}
            )
            assert second.status_code == 429 and second.json()["error"]["code"] == -31010


async def test_a_run_resource_subscription_gets_resources_updated(
    mcp_server: ServeFn, client: Callable[[str], McpClient]
) -> None:
    """resourceSubscriptions on tether://runs/{id}: agreed, then updated on a change; list
    kinds this server never changes are not agreed."""
    async with mcp_server(app) as url:
        c = client(url)
        task_id = await start(c, "gated", {"title": "res"})
        await c.wait_task(task_id, {"input_required"})
        uri = f"tether://runs/{task_id}"
        wanted = {"resourceSubscriptions": [uri, "tether://runs/ex_nope"], "toolsListChanged": True}
        async with listen(c, wanted) as stream:
            ack = await stream.next()
            assert ack["params"]["notifications"] == {"resourceSubscriptions": [uri]}
            (key,) = (await c.result("tasks/get", {"taskId": task_id}))["inputRequests"]
            await c.result("tasks/update", {"taskId": task_id, "inputResponses": {key: APPROVE}})
            updated = await stream.next()
    assert updated == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": uri, "_meta": {SUB: 40}},
    }


async def _watch(c: McpClient, tool: str, handle: str) -> tuple[list[str], dict[str, Any]]:
    """Call a watch tool with a progress token; (progress messages, structured result)."""
    params = {
        "name": tool,
        "arguments": {"handle": handle, "timeout_seconds": 60},
        "_meta": {**meta(), "progressToken": "w"},
    }
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    async with c.http.stream(
        "POST", c.url, content=orjson.dumps(body), headers=c.headers("tools/call", params)
    ) as response:
        messages = await Stream(response).rest(timeout=30)
    progress = [
        m["params"]["message"] for m in messages if m.get("method") == "notifications/progress"
    ]
    return progress, messages[-1]["result"]["structuredContent"]


@pytest.mark.parametrize(
    ("workflow", "body", "output"),
    [
        ("napper", {"seconds": 1.0, "naps": 1}, {"naps": 1}),
        ("flaky", {"key": "watch-backoff", "failures": 2}, "ok after 3 tries"),
        ("relay", {"legs": 2, "seconds": 0.2}, "arrived"),
    ],
)
async def test_a_watch_goes_on_across_sleeps_retries_and_chains_to_the_result(
    mcp_server: ServeFn,
    client: Callable[[str], McpClient],
    workflow: str,
    body: dict[str, Any],
    output: Any,
) -> None:
    """A durable sleep, a retry backoff and continue-as-new park the run; the watch does
    not stop there: it ends with the result."""
    async with mcp_server(app) as url:
        c = client(url)
        handle = await start(c, workflow, body)
        progress, result = await _watch(c, f"{workflow}_watch", handle)
    assert result["stopped"] == "ended" and result["completed"] is True
    assert result["state"] == "completed" and result["output"] == output
    assert progress


async def test_a_watch_ends_at_a_wait_for_the_caller_naming_how_to_answer(
    mcp_server: ServeFn, client: Callable[[str], McpClient]
) -> None:
    """At an approval the watch stops; its last frame names the wait and the answer call."""
    async with mcp_server(app) as url:
        c = client(url)
        handle = await start(c, "gated", {"title": "watch"})
        progress, result = await _watch(c, "gated_watch", handle)
    assert result["stopped"] == "needs_answer" and result["completed"] is False
    assert "approval 'go'" in progress[-1] and "answer_gated" in progress[-1]
    assert result["waits"][0]["answer_with"]["tool"] == "answer_gated"


async def test_nothing_is_polled_while_a_subscriber_waits(
    mcp_server: ServeFn, client: Callable[[str], McpClient]
) -> None:
    """An idle subscription takes no frame: the next message after the view is the change."""
    async with mcp_server(app) as url:
        c = client(url)
        task_id = await start(c, "gated", {"title": "idle"})
        await c.wait_task(task_id, {"input_required"})
        async with listen(c, {"taskIds": [task_id]}) as stream:
            await stream.next()
            await stream.next()
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(stream.next(), 0.5)
