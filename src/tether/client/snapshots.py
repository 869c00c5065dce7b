"""PURE: what a caller sees of a run, the same over either transport.

A snapshot is read from the MCP task view of the run (what `tasks/get` returns, the one
function `tasks/views.py` computes from the execution row): over HTTP it arrives on the wire,
over the database the client computes it from the row with that same function. So a status,
a wait, an output or an error reads the same whichever way it came.

| task view | snapshot `status` | carries |
|---|---|---|
| working | `running` | `message` (the run's details, or what it waits for) |
| input_required | `input_required` | `waits`: one `OpenWait` per input request |
| completed, `isError: false` | `completed` | `output` |
| completed, `isError: true` (a workflow error) | `failed` | `error` |
| failed (a JSON-RPC error raised by the workflow) | `failed` | `error` with its `code` |
| cancelled | `cancelled` | `message` (the reason, when one was given) |
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

import orjson

from tether.jsonrpc import codes
from tether.runtime.timestamps import timestamp
from tether.runtime.waits import parse_key

RunStatus = Literal["running", "input_required", "completed", "failed", "cancelled"]
"""Where a run stands: `running` (live, not waiting for you), `input_required` (an open wait
needs an answer), or ended: `completed`, `failed` (a workflow error or a JSON-RPC error it
raised), `cancelled` (cancelled or terminated)."""
#: The statuses a run never leaves: the task statuses a task never leaves.
ENDED: Final = codes.TERMINAL_TASK_STATUSES


@dataclass(frozen=True)
class OpenWait:
    """A wait of the run that needs an answer from outside (made by the client, from what
    the run shows).

    Attributes:
        key: answers exactly this wait; it goes stale when the run parks again (answer by
            `name` to avoid that).
        kind: `signal`, `approval`, `human_task`, `agent_step` or `remote_input` (a
            remote tool's question; None: a key that is not Tether's).
        name: the wait's name in the workflow (None: a key that is not Tether's).
        message: what is asked, in words.
        form: the JSON Schema of the answer's fields, to render as a form. For a wait whose
            answer is not a flat object it is one required string field `payload`; pass the
            answer itself to `RunHandle.answer`, the client encodes it.
    """

    key: str
    """Answers exactly this wait."""
    kind: str | None
    """`signal`, `approval`, `human_task`, `agent_step` or `remote_input`."""
    name: str | None
    """The wait's name in the workflow."""
    message: str
    """What is asked, in words."""
    form: Mapping[str, Any]
    """The JSON Schema of the answer's fields."""


@dataclass(frozen=True)
class RunError:
    """How a run failed.

    Attributes:
        kind: the exception type (`ValueError`, `StepFailed`…), `timed_out`, or `protocol`
            for a JSON-RPC error the workflow raised.
        message: the error's message.
        code: a protocol error's JSON-RPC code (None otherwise).
        data: a protocol error's data (None otherwise).
    """

    kind: str
    """The exception type, `timed_out`, or `protocol`."""
    message: str
    """The error's message."""
    code: int | None = None
    """A protocol error's JSON-RPC code."""
    data: Any = None
    """A protocol error's data."""


@dataclass(frozen=True)
class RunSnapshot:
    """One reading of a run. Two snapshots compare equal when a caller would see the same
    thing (status, message, waits, output, error), whatever their timestamps.

    Attributes:
        id: the handle's id. A retried or continued run is followed: the snapshot shows the
            chain's live run under the id you hold.
        status: where the run stands (`RunStatus`).
        message: what the run is doing (its details), what it waits for, or why it was
            cancelled; None when there is nothing to say.
        waits: the open waits (`input_required` only).
        output: a completed run's output (None otherwise).
        error: a failed run's error (None otherwise).
        created_at: when the run was created.
        updated_at: when it last changed.
        poll_interval: the suggested spacing between reads, in seconds (None once ended).
    """

    id: str
    """The handle's id."""
    status: RunStatus
    """Where the run stands."""
    message: str | None = None
    """What the run is doing, what it waits for, or why it was cancelled."""
    waits: tuple[OpenWait, ...] = ()
    """The open waits."""
    output: Any = None
    """A completed run's output."""
    error: RunError | None = None
    """A failed run's error."""
    created_at: datetime | None = field(default=None, compare=False)
    """When the run was created."""
    updated_at: datetime | None = field(default=None, compare=False)
    """When it last changed."""
    poll_interval: float | None = field(default=None, compare=False)
    """The suggested spacing between reads, in seconds."""

    @property
    def ended(self) -> bool:
        """Whether the run has ended (completed, failed or cancelled); it will not change."""
        return self.status in ENDED

    @property
    def needs_input(self) -> bool:
        """Whether the run is waiting for an answer from outside."""
        return self.status == "input_required"

    def find_wait(self, ref: str) -> list[OpenWait]:
        """The open waits a key or a name stands for.

        Args:
            ref: a wait's key, or its name.

        Returns:
            The wait with that key; else those with that name (several when waits of two
            kinds share it); else none.
        """
        by_key = [w for w in self.waits if w.key == ref]
        return by_key or [w for w in self.waits if w.name == ref]


@dataclass(frozen=True)
class Answered:
    """An answer the run took.

    Attributes:
        key: the key of the wait it answered.
        duplicate: the same answer had been given before, so nothing changed (reported by
            the database transport only).
    """

    key: str
    """The key of the wait it answered."""
    duplicate: bool = False
    """The same answer had been given before; nothing changed."""


_KEEP: Final = object()


def from_task(task: Mapping[str, Any], *, output: Any = _KEEP) -> RunSnapshot:
    """The snapshot a `DetailedTask` (tasks/get, notifications/tasks) shows. `output`, when
    given, replaces the output read from a completed task's tool result (the database
    transport has the run's output as stored; HTTP has the result's text).

    Raises ValueError when `task` is not a task view.
    """
    task_id = task.get("taskId")
    status = task.get("status")
    if not isinstance(task_id, str) or not task_id:
        raise ValueError("a task view needs a taskId")
    message = task.get("statusMessage")
    common: dict[str, Any] = {
        "id": task_id,
        "message": message if isinstance(message, str) else None,
        "created_at": timestamp(task.get("createdAt")),
        "updated_at": timestamp(task.get("lastUpdatedAt")),
        "poll_interval": _seconds(task.get("pollIntervalMs")),
    }
    if status == "working":
        return RunSnapshot(status="running", **common)
    if status == "input_required":
        return RunSnapshot(
            status="input_required", waits=_waits(task.get("inputRequests")), **common
        )
    if status == "completed":
        result = task.get("result")
        if not isinstance(result, Mapping):
            raise ValueError("a completed task needs a result")
        if result.get("isError") is True:
            return RunSnapshot(status="failed", error=_tool_error(result), **common)
        value = _tool_output(result) if output is _KEEP else output
        return RunSnapshot(status="completed", output=value, **common)
    if status == "failed":
        error = task.get("error")
        if not isinstance(error, Mapping):
            raise ValueError("a failed task needs an error")
        code = error.get("code")
        return RunSnapshot(
            status="failed",
            error=RunError(
                "protocol",
                str(error.get("message", "")),
                code if isinstance(code, int) else None,
                error.get("data"),
            ),
            **common,
        )
    if status == "cancelled":
        return RunSnapshot(status="cancelled", **common)
    raise ValueError(f"unknown task status {status!r}")


def _seconds(ms: Any) -> float | None:
    if isinstance(ms, int | float) and not isinstance(ms, bool) and ms > 0:
        return ms / 1000
    return None


def _waits(requests: Any) -> tuple[OpenWait, ...]:
    if not isinstance(requests, Mapping):
        raise ValueError("an input_required task needs inputRequests")
    waits: list[OpenWait] = []
    for key, request in requests.items():
        params = request.get("params") if isinstance(request, Mapping) else None
        params = params if isinstance(params, Mapping) else {}
        parts = parse_key(key)
        form = params.get("requestedSchema")
        waits.append(
            OpenWait(
                key=key,
                kind=parts.kind if parts is not None else None,
                name=parts.name if parts is not None else None,
                message=str(params.get("message", "")),
                form=form if isinstance(form, Mapping) else {},
            )
        )
    return tuple(waits)


def _tool_output(result: Mapping[str, Any]) -> Any:
    """A run's output from its tool result: the structured content (an object output), else
    the text, decoded when it is JSON (a list, number, boolean or null output) and as it is
    otherwise (a string output)."""
    if "structuredContent" in result:
        return result["structuredContent"]
    content = result.get("content")
    texts = [c.get("text") for c in content or [] if isinstance(c, Mapping)]
    text = next((t for t in texts if isinstance(t, str)), None)
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _tool_error(result: Mapping[str, Any]) -> RunError:
    structured = result.get("structuredContent")
    error = structured.get("error") if isinstance(structured, Mapping) else None
    error = error if isinstance(error, Mapping) else {}
    kind = error.get("type") or error.get("kind") or error.get("status") or "error"
    return RunError(str(kind), str(error.get("message", "")))
