"""A2A agents as a remote protocol (`a2a`, A2A 1.0 over JSON-RPC): `Context.ask_agent` sends
the agent a message, and the A2A task it starts is the remote task, polled with `GetTask`,
answered with a reply message, stopped with `CancelTask`.

The messages are the A2A SDK's types (`a2a-sdk`, the `a2a` extra), in their JSON form; the
requests go through the remote `Transport` as plain JSON-RPC (`Rpc(mcp=False)`), so the
remote's authentication, the trace context, the error table and the metrics are those of
every other remote request.

- **create**: `SendMessage` with `returnImmediately`, its `messageId` the call's idempotency
  key and its `contextId` derived from it: an agent that recognises a repeated `messageId`
  answers a create repeated after a crash with the task the first one made (one that does
  not starts a second task: the create is then at-least-once). A task already ended, or a
  plain message in answer (no task), ends the call at once.
- **poll**: `GetTask` (no history). Task states map onto `Status` (`_STATES`): `submitted`
  and `working` are working; `input-required` is one question (`Ask`) whose key is the id of
  the agent's status message, and whose form has one text field, `reply`; `rejected` ends
  like `failed` but raises `RemoteRejected`; `auth-required` fails the call (credentials are
  not relayed through a person's answer).
- **answer**: a reply message on the task (`taskId`, the task's `contextId`), its
  `messageId` derived from the task and the question, sent only while the task still asks
  that question (a reply repeated after a crash is not sent again once the agent took it).
- **cancel**: `CancelTask`.

An unknown task id is the SDK's `TaskNotFoundError` code: `RemoteTaskLost`. The pure
mappings (`created_of`, `snapshot_of`, `outcome_of`) need no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeVar

from a2a.types import (
    Artifact,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SendMessageResponse,
    Task,
    TaskNotFoundError,
    TaskState,
    TaskStatus,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, VERSION_HEADER
from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP
from google.protobuf import json_format, struct_pb2
from google.protobuf.message import Message as Proto

from tether.runtime.remote.config import Remote
from tether.runtime.remote.errors import (
    RemoteCancelled,
    RemoteProtocolError,
    RemoteRejected,
    RemoteTaskLost,
)
from tether.runtime.remote.protocol import Ask, Created, Reply, Snapshot, Status
from tether.runtime.remote.transport import Rpc, Transport

M = TypeVar("M", bound=Proto)

# JSON-RPC methods of A2A 1.0 (the SDK's server routes these names)
SEND_MESSAGE: Final = "SendMessage"
GET_TASK: Final = "GetTask"
CANCEL_TASK: Final = "CancelTask"
#: The protocol version every request names (the SDK's server reads a request without it
#: as 0.3 and refuses it).
VERSION: Final = PROTOCOL_VERSION_CURRENT
#: The JSON-RPC code of an unknown task.
TASK_NOT_FOUND: Final = JSON_RPC_ERROR_CODE_MAP[TaskNotFoundError]
#: The one field of the form a person fills in to answer an agent's question.
REPLY: Final = "reply"
REPLY_FORM: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {REPLY: {"type": "string", "title": "Reply", "minLength": 1}},
    "required": [REPLY],
}

#: A2A task states as the remote call's statuses (`auth-required` and unknown states are
#: refused by `snapshot_of`).
_STATES: Final[Mapping[int, Status]] = {
    TaskState.TASK_STATE_SUBMITTED: "working",
    TaskState.TASK_STATE_WORKING: "working",
    TaskState.TASK_STATE_INPUT_REQUIRED: "input_required",
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "failed",
    TaskState.TASK_STATE_CANCELED: "cancelled",
}


def _refused(remote: str, why: str) -> RemoteProtocolError:
    return RemoteProtocolError(f"agent {remote!r}: {why}", remote=remote)


def context_id(key: str) -> str:
    """The A2A `contextId` of the call whose idempotency key is `key`."""
    return f"{key}-context"


def reply_id(task: str, ask: str) -> str:
    """The `messageId` of the reply to question `ask` of task `task`: the same every time
    that reply is sent."""
    digest = hashlib.sha256(f"{task}\n{ask}".encode()).hexdigest()
    return f"tether-reply-{digest[:40]}"


def parts_of(text: str, data: Any = None) -> list[Part]:
    """A message's parts: the text, then the data (JSON) when there is some."""
    parts = [Part(text=text)]
    if data is not None:
        value = struct_pb2.Value()
        json_format.ParseDict(data, value)
        parts.append(Part(data=value))
    return parts


def _json(message: Proto) -> dict[str, Any]:
    found: dict[str, Any] = json_format.MessageToDict(message)
    return found


def _texts(parts: Sequence[Part]) -> list[str]:
    return [p.text for p in parts if p.HasField("text")]


def _data(parts: Sequence[Part]) -> list[Any]:
    return [json_format.MessageToDict(p.data) for p in parts if p.HasField("data")]


def _status_text(status: TaskStatus) -> str | None:
    if not status.HasField("message"):
        return None
    return "\n".join(_texts(status.message.parts)) or None


def _state_name(state: int) -> str:
    """A state's name in the SDK's enum (its number when the enum has none)."""
    try:
        return TaskState.Name(state)
    except ValueError:
        return str(state)


def _ask_key(status: TaskStatus) -> str:
    """A question's key: the agent's status message id; else the status's time; else a
    digest of its words (the same for every poll while the question stands)."""
    if status.HasField("message") and status.message.message_id:
        return status.message.message_id
    if status.HasField("timestamp"):
        return f"at-{status.timestamp.ToJsonString()}"
    text = _status_text(status) or ""
    return f"text-{hashlib.sha256(text.encode()).hexdigest()[:32]}"


def reply_of(artifacts: Sequence[Artifact], message: Message | None) -> dict[str, Any]:
    """What the call returns: the artifacts' text and data parts (the message's when there
    are no artifacts), and the artifacts and message themselves, in A2A's JSON form."""
    parts = [p for a in artifacts for p in a.parts] if artifacts else []
    if not parts and message is not None:
        parts = list(message.parts)
    return {
        "text": "\n".join(_texts(parts)),
        "data": _data(parts),
        "artifacts": [_json(a) for a in artifacts],
        "message": _json(message) if message is not None else None,
    }


def snapshot_of(task: Task, remote: str) -> Snapshot:
    """An A2A task as a Snapshot (module docstring).

    Raises:
        RemoteProtocolError: a state this client cannot follow (`auth-required`, unknown).
    """
    status = task.status
    if status.state == TaskState.TASK_STATE_AUTH_REQUIRED:
        raise _refused(remote, "the task asks for authentication, which is not relayed")
    found = _STATES.get(status.state)
    if found is None:
        raise _refused(remote, f"a task in state {_state_name(status.state)}")
    text = _status_text(status)
    message = status.message if status.HasField("message") else None
    if found == "input_required":
        ask = Ask(_ask_key(status), text or "", REPLY_FORM)
        return Snapshot(status=found, asks=(ask,), message=text)
    if found == "completed":
        return Snapshot(status=found, result=reply_of(task.artifacts, message), message=text)
    if found == "failed":
        error: dict[str, Any] = {"message": text, "state": _state_name(status.state)}
        if message is not None:
            error["data"] = {"message": _json(message)}
        return Snapshot(status=found, error=error, message=text)
    return Snapshot(status=found, message=text)


def created_of(response: SendMessageResponse, remote: str) -> Created:
    """A `SendMessage` result: the task it started (ended already: no task to follow), or
    the agent's message in answer (the call's value at once).

    Raises:
        RemoteProtocolError: neither a task nor a message, or a task this client cannot follow.
    """
    if response.HasField("task"):
        task = response.task
        if not task.id:
            raise _refused(remote, "a task without an id")
        snapshot = snapshot_of(task, remote)
        return Created(None if snapshot.ended else task.id, snapshot)
    if response.HasField("message"):
        return Created(None, Snapshot(status="completed", result=reply_of([], response.message)))
    raise _refused(remote, "a SendMessage result with neither a task nor a message")


def outcome_of(snapshot: Snapshot, remote: str) -> Any:
    """An ended task's value (`reply_of`).

    Raises:
        RemoteCancelled: the task was cancelled.
        RemoteRejected: the agent rejected the task.
        RemoteProtocolError: the task failed.
    """
    words = snapshot.message
    if snapshot.status == "cancelled":
        raise RemoteCancelled(words or "the agent's task was cancelled", remote=remote)
    if snapshot.status == "failed":
        error = dict(snapshot.error or {})
        data = error.get("data")
        if error.get("state") == TaskState.Name(TaskState.TASK_STATE_REJECTED):
            raise RemoteRejected(words or "the agent rejected the task", remote=remote, data=data)
        raise RemoteProtocolError(words or "the agent's task failed", remote=remote, data=data)
    return snapshot.result


class A2aAgent:
    """`a2a`: the call is an A2A task of the agent (module docstring). `arguments` holds the
    message: `text`, and `data` (JSON) when given."""

    def __init__(
        self,
        remote: Remote,
        transport: Transport,
        tool: str,
        arguments: Mapping[str, Any],
        timeout_s: float | None,
    ) -> None:
        self.remote = remote
        self.transport = transport
        self.arguments = dict(arguments)

    async def create(self, key: str, reply: Reply | None = None) -> Created:
        # An agent never asks before it starts its task (created_of reads no such answer):
        # there is never a reply to send.
        message = Message(
            message_id=key,
            context_id=context_id(key),
            role=Role.ROLE_USER,
            parts=parts_of(str(self.arguments.get("text", "")), self.arguments.get("data")),
        )
        result = await self._send(message)
        return created_of(self._parse(result, SendMessageResponse()), self.remote.name)

    async def poll(self, task: str) -> Snapshot:
        return snapshot_of(await self._task(task), self.remote.name)

    async def answer(self, task: str, answers: Mapping[str, Any]) -> None:
        current = await self._task(task)
        asking = {a.key for a in snapshot_of(current, self.remote.name).asks}
        for key, content in answers.items():
            if key not in asking:
                continue  # taken already (a send repeated after a crash), or withdrawn
            text = content.get(REPLY) if isinstance(content, Mapping) else None
            message = Message(
                message_id=reply_id(task, key),
                task_id=task,
                context_id=current.context_id,
                role=Role.ROLE_USER,
                parts=parts_of(str(text or "")),
            )
            await self._send(message, task=task)

    async def cancel(self, task: str) -> None:
        await self._request(CANCEL_TASK, CancelTaskRequest(id=task), task=task)

    def outcome(self, snapshot: Snapshot) -> Any:
        return outcome_of(snapshot, self.remote.name)

    async def _task(self, task: str) -> Task:
        result = await self._request(GET_TASK, GetTaskRequest(id=task, history_length=0), task=task)
        return self._parse(result, Task())

    async def _send(self, message: Message, *, task: str | None = None) -> dict[str, Any]:
        config = SendMessageConfiguration(return_immediately=True, history_length=0)
        request = SendMessageRequest(message=message, configuration=config)
        return await self._request(SEND_MESSAGE, request, task=task)

    async def _request(self, method: str, request: Proto, *, task: str | None) -> dict[str, Any]:
        """One JSON-RPC request; on a task (`task`), an unknown task id is a lost task."""
        rpc = Rpc(method, _json(request), headers={VERSION_HEADER: VERSION}, mcp=False)
        try:
            return await self.transport.request(rpc)
        except RemoteProtocolError as exc:
            if task is not None and exc.code == TASK_NOT_FOUND:
                raise RemoteTaskLost(
                    f"agent {self.remote.name!r} no longer knows the task: {exc}",
                    remote=self.remote.name,
                ) from exc
            raise

    def _parse(self, result: Mapping[str, Any], into: M) -> M:
        try:
            json_format.ParseDict(dict(result), into, ignore_unknown_fields=True)
        except json_format.ParseError as exc:
            raise _refused(self.remote.name, f"an answer that is not A2A's: {exc}") from exc
        return into
