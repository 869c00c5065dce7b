"""MCP as a remote protocol, the pure part: what a `tools/call` or `tasks/get` result means to
the call (`created_of`, `snapshot_of`) and what an ended task returns or raises
(`outcome_of`). Spec: ext-tasks 2026-07-28 (task statuses, `failed` vs `isError`)."""

from __future__ import annotations

from typing import Any

import pytest

from tether.runtime.remote.errors import (
    RemoteCancelled,
    RemoteProtocolError,
    RemoteToolError,
)
from tether.runtime.remote.mcp import created_of, outcome_of, snapshot_of
from tether.runtime.remote.protocol import Ask, Created, Snapshot

FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def _created(result: dict[str, Any], *, tasks: bool = True) -> Any:
    return created_of(result, "r", "t", tasks=tasks)


def test_a_create_task_result_is_the_remote_task_and_its_poll_interval() -> None:
    created = _created(
        {"resultType": "task", "taskId": "tk_1", "status": "working", "pollIntervalMs": 250}
    )
    assert created.task == "tk_1"
    assert created.snapshot == Snapshot("working", poll_ms=250)


def test_a_complete_result_is_an_ended_call_with_no_task() -> None:
    """Spec: a server may answer a declaring request synchronously; older servers omit
    resultType (read as complete)."""
    body = {"content": [{"type": "text", "text": "ok"}], "isError": False}
    for result in ({"resultType": "complete", **body}, body):
        created = _created(result)
        assert created.task is None
        assert created.snapshot.status == "completed"
        assert outcome_of(created.snapshot, "r", "t") == "ok"


@pytest.mark.parametrize(
    "result",
    [
        {"resultType": "task", "status": "working"},  # no taskId
        {"resultType": "task", "taskId": ""},
        {"resultType": "input_required", "inputRequests": {}},  # asks nothing, no state
        {"resultType": "input_required"},
        {"resultType": "weird"},
    ],
)
def test_a_create_result_the_client_cannot_use_is_a_protocol_error(result: dict[str, Any]) -> None:
    with pytest.raises(RemoteProtocolError) as caught:
        _created(result)
    assert caught.value.code is None


def test_questions_asked_before_any_task_are_an_input_required_create_with_its_state() -> None:
    """Spec (MRTR): an InputRequiredResult carries inputRequests and/or requestState; the
    create goes again with the answers and the state."""
    request = {
        "method": "elicitation/create",
        "params": {"message": "Sure?", "requestedSchema": FORM},  # mode: form by default
    }
    asked = {"resultType": "input_required", "inputRequests": {"q": request}, "requestState": "s"}
    created = _created(asked)
    assert created == Created(
        None, Snapshot("input_required", asks=(Ask("q", "Sure?", FORM),)), "s"
    )
    state_only = _created({"resultType": "input_required", "requestState": "s2"})
    assert state_only == Created(None, Snapshot("input_required"), "s2")
    with pytest.raises(RemoteProtocolError):  # a plain call declared nothing to answer with
        _created(asked, tasks=False)


def test_a_task_the_plain_call_did_not_ask_for_is_a_protocol_error() -> None:
    """Spec: a CreateTaskResult to a request that did not declare the extension is invalid."""
    with pytest.raises(RemoteProtocolError):
        _created({"resultType": "task", "taskId": "tk_1"}, tasks=False)


def test_an_input_required_task_lists_its_form_questions() -> None:
    request = {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": "Sure?", "requestedSchema": FORM},
    }
    snap = snapshot_of(
        {"status": "input_required", "inputRequests": {"k1": request}, "pollIntervalMs": 0},
        "r",
        "t",
    )
    assert snap.asks == (Ask("k1", "Sure?", FORM),)
    assert snap.poll_ms is None  # not a positive integer: unsaid
    assert snap.digest() == "input_required:k1"


@pytest.mark.parametrize(
    "request_",
    [
        {"method": "sampling/createMessage", "params": {}},
        {"method": "elicitation/create", "params": {"mode": "url", "url": "https://x"}},
        {"method": "elicitation/create", "params": {"message": "no schema"}},
    ],
)
def test_a_question_the_client_cannot_relay_is_a_protocol_error(request_: Any) -> None:
    """Our choice: only form elicitation is declared, so anything else fails the call."""
    with pytest.raises(RemoteProtocolError):
        snapshot_of({"status": "input_required", "inputRequests": {"k": request_}}, "r", "t")


def test_an_unknown_status_is_a_protocol_error() -> None:
    with pytest.raises(RemoteProtocolError):
        snapshot_of({"status": "paused"}, "r", "t")


def test_the_value_is_structured_content_else_the_text() -> None:
    """Our choice: structuredContent when present (any JSON), else the joined text items."""
    structured = Snapshot("completed", result={"structuredContent": {"n": 1}, "content": []})
    assert outcome_of(structured, "r", "t") == {"n": 1}
    text = Snapshot(
        "completed",
        result={
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image"},
                {"type": "text", "text": "b"},
            ]
        },
    )
    assert outcome_of(text, "r", "t") == "a\nb"


def test_is_error_is_a_tool_error_carrying_the_result() -> None:
    """Spec (Tasks): a tool that ran and failed is `completed` with isError."""
    result = {"content": [{"type": "text", "text": "disk full"}], "isError": True, "_meta": {}}
    with pytest.raises(RemoteToolError) as caught:
        outcome_of(Snapshot("completed", result=result), "r", "t")
    assert str(caught.value) == "disk full"
    assert caught.value.result == {"content": result["content"], "isError": True}
    assert (caught.value.remote, caught.value.tool) == ("r", "t")


def test_failed_is_a_protocol_error_with_the_tasks_error() -> None:
    """Spec (Tasks): `failed` carries the JSON-RPC error the request would have returned."""
    snap = snapshot_of(
        {"status": "failed", "error": {"code": 4001, "message": "quota", "data": {"n": 2}}},
        "r",
        "t",
    )
    with pytest.raises(RemoteProtocolError) as caught:
        outcome_of(snap, "r", "t")
    assert (caught.value.code, str(caught.value), caught.value.data) == (4001, "quota", {"n": 2})


def test_cancelled_is_remote_cancelled() -> None:
    with pytest.raises(RemoteCancelled):
        outcome_of(snapshot_of({"status": "cancelled"}, "r", "t"), "r", "t")


def test_a_completed_task_without_its_result_is_a_protocol_error() -> None:
    with pytest.raises(RemoteProtocolError):
        snapshot_of({"status": "completed"}, "r", "t")
