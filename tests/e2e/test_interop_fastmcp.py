"""Interop with a real 2026-07-28 Tasks client, `fastmcp[tasks]==4.1.4`, over loopback HTTP:
the client creates tasks, polls them, answers their input requests through `tasks/update`,
reads their results and cancels them. (fastmcp omits `Mcp-Name` on `tasks/*`; Tether accepts
that, and refuses only a mismatching one.)"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError
from fastmcp_tasks import call_tool_task

from tests.e2e.conftest import ServeFn
from tests.mcp_client import McpClient
from tether import examples
from tether.testing import conformance

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.e2e,
    pytest.mark.upstream(
        "These tests pin what fastmcp's client does at the version requirements/lock.txt "
        "installs. If the lock changed (`make lock`), fastmcp (or mcp, httpx) may behave "
        "differently now: run this module, read what the client sent and saw, and decide whether "
        "Tether or the test is wrong; update the test, docs/interop.md and the lock in one "
        "commit. If the lock did not change, Tether did."
    ),
]

TIMEOUT = 30  # seconds for a whole test body; every wait inside is bounded by it


class Answers:
    """An elicitation handler that records what it was asked and gives a fixed answer."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.asked: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, message: str, response_type: Any, params: Any, context: Any) -> Any:
        self.asked.append((message, params.requested_schema))
        return self.answer


async def test_fastmcp_drives_a_document_review_task_through_its_approval(
    mcp_server: ServeFn, client: Callable[[str], McpClient]
) -> None:
    """fastmcp creates a task, sees input_required, answers via tasks/update, reads the result."""
    answers = Answers({"decision": "approve", "ticket": "CHG-7"})
    async with (
        asyncio.timeout(TIMEOUT),
        mcp_server(examples.app) as url,
        Client(url, elicitation_handler=answers, timeout=10) as fm,
    ):
        body = {"title": "Plan", "body": "three short words"}
        task = await call_tool_task(fm, "start_document_review", {"body": body})
        assert task.create_result.result_type == "task"
        assert task.create_result.status == "working"

        parked = await task.wait(state="input_required", timeout=10)
        assert parked.task_id == task.task_id
        (key,) = parked.input_requests or {}
        request = (parked.input_requests or {})[key]
        assert request["method"] == "elicitation/create"
        schema = request["params"]["requestedSchema"]
        assert schema["properties"]["decision"]["enum"] == ["approve", "reject", "push_back"]

        result = await task.result()  # answers through the handler, then polls to the end

        assert answers.asked == [(request["params"]["message"], schema)]
        assert result.is_error is False
        assert result.structured_content is not None
        assert result.structured_content["ticket"] == "CHG-7"
        assert result.structured_content["decision"] == "approved"
        # The server agrees: the same task, completed, the answer consumed under its key.
        final = await client(url).wait_task(task.task_id, {"completed"})
        assert final["result"]["structuredContent"] == result.structured_content


async def test_fastmcp_call_tool_resolves_a_task_with_input_transparently(
    mcp_server: ServeFn,
) -> None:
    """fastmcp's plain call_tool claims the CreateTaskResult, answers the input and returns."""
    answers = Answers({"confirm": True})
    async with (
        asyncio.timeout(TIMEOUT),
        mcp_server(conformance.app) as url,
        Client(url, elicitation_handler=answers, timeout=10) as fm,
    ):
        result = await fm.call_tool("confirm_delete", {"filename": "notes.txt"})
    assert result.is_error is False
    assert [c.text for c in result.content] == ["Deleted notes.txt"]
    assert [message for message, _ in answers.asked] == ["Delete notes.txt?"]


async def test_fastmcp_without_an_elicitation_handler_sees_a_waiting_task_as_working(
    mcp_server: ServeFn, client: Callable[[str], McpClient]
) -> None:
    """Without a handler fastmcp declares no elicitation, so the parked task reads working,
    its status message naming the wait; answered another way, its result is the run's
    (our choice, as docs/clients.md says)."""
    async with (
        asyncio.timeout(TIMEOUT),
        mcp_server(examples.app) as url,
        Client(url, timeout=10) as fm,
    ):
        body = {"title": "Plan", "body": "three short words"}
        task = await call_tool_task(fm, "start_document_review", {"body": body})
        raw = client(url)  # a client that declares elicitation sees the same task ask
        asking = await raw.wait_task(task.task_id, {"input_required"})
        ((key, _),) = asking["inputRequests"].items()

        seen = await task.status()
        assert seen.status == "working"
        assert key in (seen.status_message or "")

        content = {"decision": "approve", "ticket": "CHG-9"}
        answered = await raw.call(
            "tasks/update",
            {
                "taskId": task.task_id,
                "inputResponses": {key: {"action": "accept", "content": content}},
            },
        )
        assert "result" in answered, answered
        result = await task.result()
    assert result.is_error is False
    assert result.structured_content is not None
    assert result.structured_content["ticket"] == "CHG-9"


async def test_fastmcp_cancels_a_long_task_and_it_ends_cancelled(mcp_server: ServeFn) -> None:
    """tasks/cancel from fastmcp on a task sleeping for an hour ends it `cancelled`."""
    async with (
        asyncio.timeout(TIMEOUT),
        mcp_server(conformance.app) as url,
        Client(url, timeout=10) as fm,
    ):
        task = await call_tool_task(fm, "slow_compute", {"seconds": 3600, "label": "long"})
        working = await task.status()
        assert working.status == "working"

        await task.cancel()
        final = await task.wait(timeout=10)  # polls until a terminal status

        assert final.status == "cancelled"
        assert final.result is None and final.error is None
        with pytest.raises(ToolError):
            await task.result()


async def test_fastmcp_reads_failed_and_tool_error_endings(mcp_server: ServeFn) -> None:
    """A protocol error ends `failed` with its error; a workflow error ends `completed`+isError."""
    async with (
        asyncio.timeout(TIMEOUT),
        mcp_server(conformance.app) as url,
        Client(url, timeout=10) as fm,
    ):
        failed = await call_tool_task(fm, "protocol_error_job", {"reason": "boom"})
        tool_error = await call_tool_task(
            fm, "failing_job", {"reason": "nope"}, raise_on_error=False
        )

        ended = await failed.wait(timeout=10)
        assert ended.status == "failed"
        assert ended.error is not None and ended.error["code"] == -32603
        with pytest.raises(ToolError):
            await failed.result()

        ended = await tool_error.wait(timeout=10)
        assert ended.status == "completed"
        result = await tool_error.result()
        assert result.is_error is True
