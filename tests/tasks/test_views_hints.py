"""PURE: the statusMessage of a task that waits names ways that work for its reader (a
client that declared the Tasks extension, or it would not read the task): the workflow's
answer tool when the catalog serves one, and tasks/update with the wait's key."""

from __future__ import annotations

from tests.factories import execution_row
from tether.tasks import views

KEY = "ex_" + "c" * 32 + ":approval:publish:3"
WAIT = {"key": KEY, "kind": "approval", "name": "publish", "prompt": "Ship it?", "schema": {}}


def status_message(answer_tool: str | None) -> str:
    run = execution_row(id="ex_" + "c" * 32, workflow="review", status="waiting", waits=[WAIT])
    task = views.task(
        run, run, (run,), elicitation=False, poll_interval_ms=100, answer_tool=answer_tool
    )
    assert task["status"] == "working"
    message: str = task["statusMessage"]
    return message


def test_a_waiting_task_names_the_answer_tool_and_tasks_update_with_the_key() -> None:
    message = status_message("answer_review")
    assert "approval 'publish'" in message and KEY in message
    assert "answer_review" in message and "tasks/update" in message
    assert "signal_review" not in message  # it cannot answer an approval


def test_without_an_answer_tool_only_tasks_update_is_named() -> None:
    """A workflow served as a tool or with Exposure(tasks=True) has no answer tool."""
    message = status_message(None)
    assert "tasks/update" in message and KEY in message and "answer_" not in message
