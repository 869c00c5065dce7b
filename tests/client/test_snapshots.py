"""PURE: snapshots read from task views (the table in tether/client/snapshots.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import execution_row
from tether.client.errors import violation_lines
from tether.client.snapshots import OpenWait, RunError, from_task
from tether.storage.rows import ExecutionRow
from tether.tasks import views


def task_of(row: ExecutionRow) -> dict[str, Any]:
    return views.task(row, row, (row,), elicitation=True, poll_interval_ms=250)


APPROVAL = {
    "key": "ex_1:approval:publish:4",
    "kind": "approval",
    "name": "publish",
    "prompt": "Publish?",
    "schema": {
        "type": "object",
        "properties": {"decision": {"type": "string"}, "ticket": {"type": "string"}},
        "required": ["decision"],
    },
}


def test_a_live_run_is_running_with_its_details_and_poll_interval() -> None:
    """working → running; statusMessage → message; pollIntervalMs in seconds."""
    snap = from_task(task_of(execution_row(id="ex_1", status="running", details="step 2/5")))
    assert (snap.id, snap.status, snap.message, snap.poll_interval) == (
        "ex_1",
        "running",
        "step 2/5",
        0.25,
    )
    assert not snap.ended and not snap.needs_input and snap.created_at is not None


def test_a_parked_run_lists_each_open_wait_with_its_kind_name_and_form() -> None:
    """input_required → one OpenWait per input request, kind and name read from the key."""
    snap = from_task(task_of(execution_row(id="ex_1", status="waiting", waits=[APPROVAL])))
    assert snap.status == "input_required" and snap.needs_input
    (wait,) = snap.waits
    assert wait == OpenWait(
        key="ex_1:approval:publish:4",
        kind="approval",
        name="publish",
        message="Publish?",
        form=views.flat_form(APPROVAL["schema"]) or {},
    )
    assert snap.find_wait("publish") == [wait] == snap.find_wait(wait.key)
    assert snap.find_wait("other") == []


@pytest.mark.parametrize(
    "output", [{"a": 1}, [1, 2], 3, 2.5, True, None, "plain text", "café"], ids=repr
)
def test_a_completed_run_carries_its_output(output: Any) -> None:
    """The output from the tool result: the structured content, else the text (decoded
    when it is JSON)."""
    snap = from_task(task_of(execution_row(status="completed", output=output)))
    assert (snap.status, snap.output, snap.ended) == ("completed", output, True)


def test_a_string_output_that_is_json_text_reads_decoded_unless_given() -> None:
    """Over HTTP a string output holding JSON text reads decoded (the tool result's text is
    all there is); the database transport passes the stored output instead."""
    task = task_of(execution_row(status="completed", output="42"))
    assert from_task(task).output == 42
    assert from_task(task, output="42").output == "42"


def test_a_workflow_error_and_a_protocol_error_both_read_failed() -> None:
    """completed with isError (a workflow error) and failed (a JSON-RPC error) are both
    `failed`, with the error's kind and message (and code for a protocol error)."""
    boom = {"kind": "workflow", "type": "ValueError", "message": "it broke"}
    snap = from_task(task_of(execution_row(status="failed", error=boom)))
    assert (snap.status, snap.error) == ("failed", RunError("ValueError", "it broke"))
    timed = from_task(task_of(execution_row(status="timed_out", error={"message": "late"})))
    assert timed.error == RunError("timed_out", "late")
    protocol = {"kind": "protocol", "code": -31999, "message": "no", "data": {"x": 1}}
    snap = from_task(task_of(execution_row(status="failed", error=protocol)))
    assert snap.error == RunError("protocol", "no", -31999, {"x": 1})


def test_a_cancelled_run_reads_cancelled_with_its_reason() -> None:
    """cancelled and terminated runs read `cancelled`."""
    for status in ("cancelled", "terminated"):
        row = execution_row(status=status, error={"kind": status, "message": "stop"})
        snap = from_task(task_of(row))
        assert (snap.status, snap.message, snap.ended) == ("cancelled", "stop", True)


def test_snapshots_compare_by_what_a_caller_sees_not_by_timestamps() -> None:
    """A view that changed only its lastUpdatedAt is the same snapshot."""
    task = task_of(execution_row(status="running", details="x"))
    later = {**task, "lastUpdatedAt": "2031-01-01T00:00:00Z", "pollIntervalMs": 9000}
    assert from_task(task) == from_task(later)
    assert from_task(task) != from_task({**task, "statusMessage": "y"})


@pytest.mark.parametrize(
    "task",
    [
        {"status": "working"},
        {"taskId": "t", "status": "paused"},
        {"taskId": "t", "status": "completed"},
        {"taskId": "t", "status": "failed"},
        {"taskId": "t", "status": "input_required"},
    ],
)
def test_what_is_not_a_task_view_is_a_value_error(task: dict[str, Any]) -> None:
    """A missing id, an unknown status, or a status without its field is refused."""
    with pytest.raises(ValueError):
        from_task(task)


def test_violations_read_as_field_and_message_lines() -> None:
    """Validation errors (loc, msg) and plain lines become `field: message` lines."""
    lines = violation_lines(
        [{"loc": ["a", 0], "msg": "bad"}, {"loc": [], "msg": "whole"}, "ticket: required"]
    )
    assert lines == ("a.0: bad", "(root): whole", "ticket: required")
