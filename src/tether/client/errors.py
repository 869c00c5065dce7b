"""What `tether.client` raises: one tree for both transports, so application code catches the
same class whether it talks to the database or to a server.

    ClientError          base class; also a failure no subclass names
     ├── RunNotFound          no run has that id (deleted by retention, another tenant's, or
     │                        over HTTP a run of a workflow the server serves not as a task)
     ├── WorkflowNotFound     no workflow of that name can be started (HTTP: no start_<name>)
     ├── InvalidInput         the workflow refused the input; `.violations`
     ├── StartConflict        the idempotency key is held by a run with different input
     ├── AnswerRefused        the answer does not fit (`.violations`), no open wait has that
     │                        key or name (`.open_waits`), or it was answered differently
     ├── NotAuthorized        HTTP: no valid token, or its role may not do this
     ├── TransportError       the database or server cannot be reached, is not ready, or
     │                        answered with something this client cannot read; retry later
     ├── RunFailed            result(): the run ended with an error; `.error`
     ├── RunCancelled         result(): the run was cancelled or terminated
     ├── UnexpectedResult     result(): the output does not fit the handle's result_type
     └── WaitTimedOut         a wait's timeout passed first (also a TimeoutError)

Each transport translates the errors below it (the runtime's, httpx's, the server's JSON-RPC
codes and tool errors) into these with one table (`runtime_errors.py`, `http.py`). The test
kit raises this tree too, with leaves of its own where it can tell more apart
(`tether.testing.errors`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.client.snapshots import RunError


class ClientError(Exception):
    """A Tether client (or test kit) call failed.

    Args:
        message: what happened, in words (default: the class's first docstring line).

    Attributes:
        message: what happened, in words.
    """

    def __init__(self, message: str | None = None) -> None:
        self.message = message or (type(self).__doc__ or "").strip().splitlines()[0]
        """What happened, in words."""
        super().__init__(self.message)


class RunNotFound(ClientError):
    """No run has that id.

    Args:
        message: what happened, in words (default: the class's first docstring line).
    """


class WorkflowNotFound(ClientError):
    """No workflow of that name can be started here.

    Args:
        message: what happened, in words (default: the class's first docstring line).
    """


class InvalidInput(ClientError):
    """The workflow refused the input.

    Args:
        message: what happened, in words (default: the class's first docstring line).
        violations: the problems found, as `field: problem` lines or validation error
            dicts (`loc`, `msg`).

    Attributes:
        violations: one `field: problem` line per problem found.
    """

    def __init__(self, message: str | None = None, violations: Iterable[Any] = ()) -> None:
        super().__init__(message)
        self.violations = violation_lines(violations)
        """One `field: problem` line per problem found."""


class StartConflict(ClientError):
    """That idempotency key is held by a run started with different input.

    Args:
        message: what happened, in words (default: the class's first docstring line).
        run_id: the run that holds the key, when the transport tells (the database does).

    Attributes:
        run_id: the run that holds the key, or None.
    """

    def __init__(self, message: str | None = None, run_id: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        """The run that holds the key, or None."""


class AnswerRefused(ClientError):
    """The answer was refused; the run is unchanged.

    Args:
        message: what happened, in words (default: the class's first docstring line).
        violations: how the answer does not fit the wait (empty when the wait itself was
            the problem).
        open_waits: the keys of the waits open now, when the key or name given matched
            none, or several.

    Attributes:
        violations: one `field: problem` line per way the answer does not fit.
        open_waits: the keys of the waits open now (empty unless the wait was not found).
    """

    def __init__(
        self,
        message: str | None = None,
        *,
        violations: Iterable[Any] = (),
        open_waits: Iterable[str] = (),
    ) -> None:
        super().__init__(message)
        self.violations = violation_lines(violations)
        """One `field: problem` line per way the answer does not fit."""
        self.open_waits = tuple(open_waits)
        """The keys of the waits open now (empty unless the wait was not found)."""


class NotAuthorized(ClientError):
    """The server refused the credentials, or they do not allow this.

    Args:
        message: what happened, in words (default: the class's first docstring line).
    """


class TransportError(ClientError):
    """The database or server could not be reached or did not answer as expected.

    Args:
        message: what happened, in words (default: the class's first docstring line).
    """


class RunFailed(ClientError):
    """The run ended with an error.

    Args:
        error: how it failed.

    Attributes:
        error: how it failed (`kind`, `message`, and for a protocol error `code`, `data`).
    """

    def __init__(self, error: RunError) -> None:
        super().__init__(f"the run failed: {error.kind}: {error.message}")
        self.error = error
        """How it failed."""


class RunCancelled(ClientError):
    """The run was cancelled.

    Args:
        message: what happened, in words (default: the class's first docstring line).
    """


class UnexpectedResult(ClientError):
    """The run's output does not fit the result type asked for.

    Args:
        message: what happened, in words (default: the class's first docstring line).
    """


class WaitTimedOut(ClientError, TimeoutError):
    """The run did not get there before the timeout.

    Args:
        message: what happened, in words (default: the class's first docstring line).
    """


def violation_lines(violations: Iterable[Any]) -> tuple[str, ...]:
    """Problems as `field: message` lines: strings as they are; validation error dicts
    (`loc`, `msg`) joined as `a.b: message` (`(root)` for the whole value)."""
    lines: list[str] = []
    for v in violations:
        if isinstance(v, dict):
            loc = v.get("loc") or []
            where = ".".join(str(p) for p in loc) if isinstance(loc, list | tuple) else str(loc)
            lines.append(f"{where or '(root)'}: {v.get('msg', '')}")
        else:
            lines.append(str(v))
    return tuple(lines)
