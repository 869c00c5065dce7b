"""`tasks/update` and `answer_<wf>` give the same outcome on the same situation: both go
through the one runtime `answer` path, so an answer one refuses the other refuses (and the run
is unchanged), and an answer one accepts ends the run the same way through the other
(docs/answering-waits.md). On a key that is closed, tasks/update ignores the entry (the spec's
rule for keys that are not outstanding) where the tool reports `duplicate` or refuses a
different answer: the run is unchanged either way."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from tests.apps.answering import NoArgs, app
from tests.e2e.conftest import ServeFn
from tests.e2e.test_answer_tool import (
    Client,
    answer,
    ended,
    error,
    ok,
    start,
    status_until,
    waiting,
)
from tests.e2e.test_answer_tool import tool as call_tool
from tests.mcp_client import McpClient
from tether.jsonrpc import codes
from tether.runtime.context import Context
from tether.runtime.exposure import Exposure
from tether.runtime.registry import App

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

GOOD_FORM = {"title": "t", "count": 3, "ratio": 0.5, "ok": True}

#: (workflow, wait name, response, accepted?)
SITUATIONS: list[tuple[str, str, Any, bool]] = [
    ("gate", "publish", {"decision": "approve"}, False),  # required input missing
    ("gate", "publish", {"decision": "maybe", "ticket": "T"}, False),
    ("gate", "publish", {"decision": "approve", "ticket": "T", "colour": "red"}, True),  # kept
    ("gate", "publish", {"decision": "approve", "ticket": 7}, False),
    ("gate", "publish", {"decision": "approve", "ticket": "T"}, True),
    ("gate", "publish", {"decision": "reject", "reason": "no"}, True),
    ("gate", "publish", {"decision": "push_back", "comment": "again"}, True),
    ("form", "fill", {**GOOD_FORM, "count": "three"}, False),
    ("form", "fill", {**GOOD_FORM, "decision": "later"}, False),
    ("form", "fill", GOOD_FORM, True),
    ("form", "fill", {"decision": "push_back", "why": "unclear"}, True),
    ("sig", "go", {"n": "x"}, False),
    ("sig", "go", {"n": 1}, True),
    ("agent", "summarise", {}, False),
    ("agent", "summarise", {"summary": "s"}, True),
]


async def _by_tasks_update(c: McpClient, wf: str, response: Any) -> tuple[str, dict[str, Any]]:
    created = await call_tool(c, f"start_{wf}", {"body": {}}, capabilities=None)
    task_id: str = created["taskId"]
    task = await c.wait_task(task_id, {"input_required"})
    (key,) = task["inputRequests"]
    body = await c.call(
        "tasks/update",
        {
            "taskId": task_id,
            "inputResponses": {key: {"action": "accept", "content": response}},
        },
    )
    return task_id, body


async def _row(c: McpClient, wf: str, handle: str) -> dict[str, Any]:
    return ok(await call_tool(c, f"{wf}_status", {"handle": handle}))


@pytest.mark.parametrize(("wf", "wait", "response", "accepted"), SITUATIONS)
async def test_tasks_update_and_the_answer_tool_agree(
    mcp_server: ServeFn, client: Client, wf: str, wait: str, response: Any, accepted: bool
) -> None:
    async with mcp_server(app) as url:
        c = client(url)
        handle = await start(c, wf)
        before_tool = await status_until(c, wf, handle, waiting)
        task_id, body = await _by_tasks_update(c, wf, response)
        before_task = await _row(c, wf, task_id)
        by_tool = await answer(c, wf, handle, wait, response)
        if not accepted:
            assert body["error"]["code"] == -32602, body
            assert error(by_tool)["code"] == "invalid_tool_input"
            for h, before in ((handle, before_tool), (task_id, before_task)):
                after = await _row(c, wf, h)
                assert (after["run_version"], after["waits"]) == (
                    before["run_version"],
                    before["waits"],
                )
            return
        assert "result" in body and "error" not in body, body
        assert ok(by_tool)["status"] == "accepted"
        finals = await asyncio.gather(
            status_until(c, wf, handle, ended), status_until(c, wf, task_id, ended)
        )
        assert [f["state"] for f in finals] == ["completed", "completed"]
        assert finals[0]["output"] == finals[1]["output"]


async def test_an_answer_given_through_tasks_update_is_seen_by_the_answer_tool(
    mcp_server: ServeFn, client: Client
) -> None:
    """One path, one record: after tasks/update answered a key, the tool reports the same
    answer as `duplicate` and refuses a different one; the run ends as tasks/update decided."""
    response = {"decision": "approve", "ticket": "T-9"}
    async with mcp_server(app) as url:
        c = client(url)
        task_id, body = await _by_tasks_update(c, "gate", response)
        assert "result" in body, body
        done = await c.wait_task(task_id, {"completed"})
        assert done["result"]["structuredContent"]["inputs"] == {"ticket": "T-9"}
        assert "waits" not in await _row(c, "gate", task_id)  # nothing open any more
        key = f"{task_id}:approval:publish:"
        refused = error(await answer(c, "gate", task_id, "publish", {"decision": "reject"}))
        assert refused["code"] == "conflict"
        same = ok(await answer(c, "gate", task_id, "publish", response))
        assert same["status"] == "duplicate" and same["key"].startswith(key)
        assert ok(await answer(c, "gate", task_id, same["key"], response))["status"] == "duplicate"


class Batch(BaseModel):
    items: list[dict[str, int]]


listing = App("listing")


@listing.workflow(expose=Exposure(tool_set=True))
async def batch(ctx: Context, args: NoArgs) -> dict[str, Any]:
    got = await ctx.wait_for_signal("items", schema=Batch)
    return {"items": got.items}


async def test_tasks_update_refuses_payload_text_that_is_not_json_naming_the_field(
    mcp_server: ServeFn, client: Client
) -> None:
    """Our rule for text on every surface: the fallback form's `payload` text that is not
    JSON, for a wait that takes an object, is refused (-32602) naming `payload`, and the wait
    stays open for a good answer (before, it went on as a string and the answer path refused
    that string against the schema)."""
    async with mcp_server(listing) as url:
        c = client(url)
        created = await call_tool(c, "start_batch", {"body": {}}, capabilities=None)
        task_id: str = created["taskId"]
        task = await c.wait_task(task_id, {"input_required"})
        ((key, request),) = task["inputRequests"].items()
        assert list(request["params"]["requestedSchema"]["properties"]) == ["payload"]

        async def update(text: str) -> dict[str, Any]:
            content = {"payload": text}
            responses = {key: {"action": "accept", "content": content}}
            return await c.call("tasks/update", {"taskId": task_id, "inputResponses": responses})

        refused = await update("one, two")
        assert refused["error"]["code"] == codes.INVALID_PARAMS, refused
        errors = refused["error"]["data"]["errors"]
        assert [e.split(":")[0] for e in errors] == ["payload"]
        assert "result" in await update('{"items": [{"a": 1}]}')
        done = await c.wait_task(task_id, {"completed"})
    assert done["result"]["structuredContent"] == {"items": [{"a": 1}]}
