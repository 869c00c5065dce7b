"""Runtime errors. Two families:

Operation errors, raised to callers of `Operations` (every surface maps them to its own wire):

    TetherError
     ├── WorkflowNotFound       no workflow registered under that name
     │    ├── ProfileNotFound       no runtime profile of that name is configured
     │    └── QueueNotFound         no admission queue of that name is configured
     ├── ExecutionNotFound      no run with that id (never existed, or deleted by retention)
     ├── UpdateNotFound         the workflow has no update of that name
     ├── InvalidInput           input fails the workflow's or update's model; `.errors`
     ├── Conflict               the run's state forbids the operation; nothing changed
     │    ├── RunAlreadyActive      idempotency key held by a live run (on_live_match="fail")
     │    ├── IdempotencyMismatch   idempotency key reused with different input
     │    ├── RunEnded              the run has ended
     │    ├── SingletonConflict     a singleton start found a run of the workflow live
     │    ├── AnswerConflict        a different answer to a wait that was already answered
     │    └── LinkUsed              a single-use approval link that has acted already
     ├── WaitNotOpen            no open wait has that key or name; `.open_waits` lists the open ones
     │    └── WaitAmbiguous         several open waits have that name: answer by key
     ├── AnswerRejected         the answer does not fit the wait; `.errors`
     │    ├── AnswerUnstorable      too large to store, or text with NUL; `.limit_bytes`, `.nul_at`
     │    └── VoteRefused           the voter may not cast this vote; `.errors` names the rule
     ├── UpdateRejected         the update's validator refused the input; `.reason`
     ├── UpdateFailed           the update handler failed or ran too long; `.error`
     ├── UpdateTimeout          the update was admitted but did not finish in time; `.update_id`
     └── Unavailable            the database cannot be reached; retry later

Errors raised inside workflow code (subclass Exception so workflows may catch them):
ProtocolError, StepFailed, WaitTimeout, Rejected, NonDeterminism.

Control flow that user code must not swallow derives from BaseException: see `signals.py`.
"""

from __future__ import annotations

from typing import Any


class TetherError(Exception):
    """A Tether operation failed."""

    def __init__(self, message: str | None = None) -> None:
        self.message = message or (type(self).__doc__ or "").strip().splitlines()[0]
        super().__init__(self.message)


class WorkflowNotFound(TetherError):
    """No workflow is registered under that name."""


class ExecutionNotFound(TetherError):
    """No run has that id."""


# A start that names a profile or queue the deployment does not configure is refused like one
# naming an unknown workflow: every surface already maps WorkflowNotFound to its not-found.
class ProfileNotFound(WorkflowNotFound):
    """No runtime profile of that name is configured."""


class QueueNotFound(WorkflowNotFound):
    """No admission queue of that name is configured."""


class InvalidInput(TetherError):
    """The input does not fit the expected model."""

    def __init__(self, message: str | None = None, errors: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.errors = errors or []


class Conflict(TetherError):
    """The run's current state forbids this operation."""


class RunAlreadyActive(Conflict):
    """A live run already holds that idempotency key."""

    def __init__(self, message: str | None = None, execution_id: str = "") -> None:
        super().__init__(message)
        self.execution_id = execution_id


class IdempotencyMismatch(Conflict):
    """That idempotency key was used with different input; `.execution_id` holds the key."""

    def __init__(self, message: str | None = None, execution_id: str = "") -> None:
        super().__init__(message)
        self.execution_id = execution_id


class RunEnded(Conflict):
    """The run has ended."""


class SingletonConflict(Conflict):
    """A singleton start found a run of that workflow live; `.execution_id` names it."""

    def __init__(self, message: str | None = None, execution_id: str = "") -> None:
        super().__init__(message)
        self.execution_id = execution_id


class AnswerConflict(Conflict):
    """That wait was already answered differently."""


class LinkUsed(Conflict):
    """That approval link has been used already."""


class WaitNotOpen(TetherError):
    """No open wait has that key.

    `open_waits` lists the run's open waits as `{key, kind, name}`, so the caller can retry
    with the one that is open now; `open_keys` their keys.
    """

    def __init__(
        self,
        message: str | None = None,
        open_keys: list[str] | None = None,
        open_waits: list[dict[str, str]] | None = None,
    ):
        super().__init__(message)
        self.open_waits = open_waits or []
        self.open_keys = open_keys or [w["key"] for w in self.open_waits]


class WaitAmbiguous(WaitNotOpen):
    """Several open waits have that name; answer by key."""


class AnswerRejected(TetherError):
    """The answer does not fit what the wait asks for."""

    def __init__(self, message: str | None = None, errors: list[str] | None = None):
        super().__init__(message)
        self.errors = errors or []


class AnswerUnstorable(AnswerRejected):
    """The answer cannot be stored, whatever the wait asks for: larger than the payload cap
    (`limit_bytes`, and its `size_bytes`), or text holding the NUL character, which PostgreSQL
    cannot store (`nul_at`: a JSON pointer to that string or key)."""

    def __init__(
        self,
        message: str,
        *,
        limit_bytes: int | None = None,
        size_bytes: int | None = None,
        nul_at: str | None = None,
    ) -> None:
        super().__init__(message, errors=[message])
        self.limit_bytes = limit_bytes
        self.size_bytes = size_bytes
        self.nul_at = nul_at


class VoteRefused(AnswerRejected):
    """The voter may not cast this vote on the approval (not among its approvers, not in its
    role, or the run's starter approving it); `.errors` names the rule."""


class UpdateNotFound(TetherError):
    """The workflow has no update of that name."""


class UpdateRejected(TetherError):
    """The update's validator refused the input."""

    def __init__(self, message: str | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


class UpdateFailed(TetherError):
    """The update handler failed."""

    def __init__(self, message: str | None = None, error: Any = None) -> None:
        super().__init__(message)
        self.error = error


class UpdateTimeout(TetherError):
    """The update was admitted but did not finish in time."""

    def __init__(self, message: str | None = None, update_id: str = "") -> None:
        super().__init__(message)
        self.update_id = update_id


class Unavailable(TetherError):
    """The database is unavailable; retry later."""


# --- raised inside workflow code -------------------------------------------------------------


class ProtocolError(Exception):
    """Raise from a workflow to end its run with a JSON-RPC error (task status `failed`).

    An MCP client reads it as the failed task's JSON-RPC error `{code, message, data}`; a
    code in the range the spec reserves (-32000 to -32099) that MCP does not define for
    this use is reported as -32603, with the workflow's code in `data`.

    Args:
        code: The JSON-RPC error code.
        message: The error's message.
        data: Further JSON the error carries.

    Attributes:
        code: The JSON-RPC error code.
        message: The error's message.
        data: Further JSON the error carries.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class StepFailed(Exception):
    """A step failed after its retries; raised the same way on the first run and on replay.

    [`Context.step`][tether.Context.step] raises it. The original exception is not kept (a
    replay has only the record), so code that catches it reads what was recorded when the
    step last ran. Uncaught, it fails the run.

    Args:
        name: The step's name.
        type_: The class name of the step's exception.
        message: The step's exception as text.

    Attributes:
        name: The step's name.
        type: The class name of the step's exception.
        error_message: The step's exception as text.
    """

    def __init__(self, name: str, type_: str, message: str) -> None:
        super().__init__(f"step {name!r} failed: {type_}: {message}")
        self.name = name
        self.type = type_
        self.error_message = message


class WaitTimeout(Exception):
    """A wait's timeout passed before it was answered.

    Raised by the waits of [`Context`][tether.Context] given a `timeout`, the same way on
    every replay. Uncaught, it fails the run.
    """


class Rejected(Exception):
    """An approval was rejected; uncaught, it ends the run as failed with the reason.

    Raised by [`Context.approval`][tether.Context.approval] (and by
    [`Context.wait_all`][tether.Context.wait_all] for an [`Approval`][tether.Approval]).

    Args:
        gate: The approval's name.
        reason: The reason the answer gave.
        by: Who rejected it, when known.

    Attributes:
        gate: The approval's name.
        reason: The reason the answer gave.
        by: Who rejected it, when known.
    """

    def __init__(self, gate: str, reason: str | None, by: str | None = None) -> None:
        super().__init__(f"approval {gate!r} rejected" + (f": {reason}" if reason else ""))
        self.gate = gate
        self.reason = reason
        self.by = by

    def as_error(self) -> dict[str, Any]:
        """The error a run it ends is stored with (kind `rejected`)."""
        return {
            "kind": "rejected",
            "type": type(self).__name__,
            "message": str(self),
            "gate": self.gate,
            "reason": self.reason,
            "by": self.by,
        }


class NonDeterminism(Exception):
    """Replay found a different durable call than the one recorded at that position.

    The workflow's code changed under a run, or it is not deterministic (it branched on
    the clock, randomness or anything outside the run). The run fails at once rather than
    go on with the wrong records; catching this error does not change that.
    """
