"""The MCP endpoint end to end over a real socket: start a workflow as a task, answer its
approval through tasks/update, read the result."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.e2e.conftest import ServeFn
from tests.mcp_client import McpClient
from tether.examples import app

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]


async def test_a_task_is_created_answered_and_completed_over_http(
    mcp_server: ServeFn, client: Callable[[str], McpClient]
) -> None:
    """tools/call → CreateTaskResult; tasks/get → input_required; tasks/update → completed."""
    async with mcp_server(app) as url:
        c = client(url)
        created = await c.result(
            "tools/call",
            {
                "name": "start_document_review",
                "arguments": {"body": {"title": "Plan", "body": "two words"}},
            },
        )
        assert created["resultType"] == "task" and created["status"] == "working"
        task_id = created["taskId"]
        task = await c.wait_task(task_id, {"input_required"})
        (key,) = task["inputRequests"]
        ack = await c.result(
            "tasks/update",
            {
                "taskId": task_id,
                "inputResponses": {
                    key: {"action": "accept", "content": {"decision": "approve", "ticket": "CHG-9"}}
                },
            },
        )
        assert set(ack) <= {"resultType", "_meta"}
        task = await c.wait_task(task_id, {"completed"})
    assert task["result"]["structuredContent"]["ticket"] == "CHG-9"
    assert task["result"]["isError"] is False
