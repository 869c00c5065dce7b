"""The seam between a durable remote call and the protocol that carries it.

A remote protocol is a small class with four operations over the wire and one pure mapping:

- `create(key, reply)`: ask the remote to run the call, under an idempotency key that is the
  same every time this call is created again (after a crash); returns the remote's task
  handle, or the ending when the remote answered at once, or the questions it asks before it
  creates anything (`Created.task` None, its snapshot `input_required`): the create is then
  sent again with their answers (`reply`), under a key of that round's own;
- `poll(task)`: where the task stands now (`Snapshot`);
- `answer(task, answers)`: forward answers to the questions the task asked (`Ask.key` →
  the answer's content);
- `cancel(task)`: ask the remote to stop the task;
- `outcome(snapshot)`: the value an ended task returns to the workflow, or the
  `RemoteError` it raises (pure).

The durable driver (`call.py`) does everything else the same way for every protocol: it
records the task handle before the first poll, polls on durable timers, opens a wait on the
run for each question and forwards its answer once, sends the cancel once, retries transient
failures with backoff. A protocol raises `Transient` for a failure worth retrying,
`RemoteTaskLost` when the remote no longer knows the task, `RemoteProtocolError` when the
remote refused the request; nothing of its transport escapes.

MCP with the Tasks extension (`mcp-tasks`) and plain MCP (`mcp`, a synchronous call) live in
`mcp.py`; A2A (`a2a`) in `a2a.py`, one more class registered in `PROTOCOLS`
(implementations.py), built by the same `Factory`: its requests go through the `Transport` it
is given as plain JSON-RPC (`Rpc(mcp=False)`), with the remote's authentication, the trace
context, the error mapping and the metrics of every other request; its task states map onto
`Status`, its questions onto `Ask`, its artifacts onto `outcome`. Another protocol would slot
in the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from tether.runtime.remote.config import Remote
from tether.runtime.remote.transport import Transport

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]
ENDED: frozenset[Status] = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True)
class Ask:
    """One question the remote's task asks, as a form to fill in.

    Attributes:
        key: The remote's key for it (unique over the remote task's life).
        message: What the person is asked.
        schema: The form's JSON schema (a flat object of primitive fields).
    """

    key: str
    message: str
    schema: Mapping[str, Any]


@dataclass(frozen=True)
class Snapshot:
    """Where a remote task stands.

    Attributes:
        status: The task's status, in the MCP Tasks vocabulary.
        poll_ms: How long the remote asks to wait before the next poll (None: unsaid).
        asks: The questions outstanding now (status `input_required`).
        result: An ended task's result, as the protocol carries it (`outcome` reads it).
        error: A `failed` task's error (`{code, message, data}`).
        message: The remote's words about the task's state, if any.
    """

    status: Status
    poll_ms: int | None = None
    asks: tuple[Ask, ...] = ()
    result: Any = None
    error: Mapping[str, Any] | None = None
    message: str | None = None

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    def digest(self) -> str:
        """What a run parked on the task acts on: its status and the keys of its questions.
        A poll whose snapshot has the same digest changes nothing for the run."""
        return f"{self.status}:" + ",".join(sorted(a.key for a in self.asks))


@dataclass(frozen=True)
class Created:
    """What a create returned: the remote's task (`task`, its first snapshot), or, when the
    remote answered at once, no task and the ended snapshot; or, when it asks before it
    creates anything, no task and an `input_required` snapshot with its questions, and the
    opaque `state` the create must carry back with their answers."""

    task: str | None
    snapshot: Snapshot
    state: str | None = None


@dataclass(frozen=True)
class Reply:
    """The answers to the questions a create was answered with (`Ask.key` -> the answer's
    content), and the `state` it came with, for the create sent again."""

    answers: Mapping[str, Any]
    state: str | None = None


class RemoteProtocol(Protocol):
    """One remote protocol, bound to one remote and one tool (module docstring)."""

    async def create(self, key: str, reply: Reply | None = None) -> Created: ...

    async def poll(self, task: str) -> Snapshot: ...

    async def answer(self, task: str, answers: Mapping[str, Any]) -> None: ...

    async def cancel(self, task: str) -> None: ...

    def outcome(self, snapshot: Snapshot) -> Any:
        """The value of an ended snapshot; raises the RemoteError it stands for."""
        ...


#: Builds a protocol for (the remote, its transport, the tool, the arguments, the call's
#: timeout in seconds or None).
Factory = Callable[[Remote, Transport, str, Mapping[str, Any], float | None], RemoteProtocol]
