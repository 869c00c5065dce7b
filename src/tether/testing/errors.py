"""What `tether.testing` raises: the client's tree (`tether.client.errors`), since a test drives
runs from outside as an application does, with the leaves only the kit can tell apart.

    ClientError (KitError)      base class; also a failure no subclass names
     ├── RunNotFound                no run has that id
     ├── WorkflowNotFound           the App has no workflow of that name
     ├── InvalidInput               the workflow refused the input; `.violations`
     ├── StartConflict              the idempotency key is held by a run with other input
     ├── AnswerRefused
     │    ├── AnswerRejected        the answer does not fit the wait; `.violations`
     │    ├── AnswerConflict        the wait was already answered differently
     │    └── WaitNotOpen           no open wait has that key (or several have that name);
     │                              `.open_waits`
     ├── RunEnded                   the run ended before the wait the test waited for opened,
     │                              or before a signal reached it
     ├── RunFailed                  `result()`: the run ended without completing; `.status`,
     │                              `.error` (the error as the runtime recorded it)
     ├── TransportError             (DatabaseUnavailable) the test server cannot be reached,
     │                              or refused
     └── WaitTimedOut               a wait ran out of wall-clock time (also a TimeoutError)

`KitError` and `DatabaseUnavailable` are the client's `ClientError` and `TransportError` under
the kit's names; every other class without a kit leaf here is the client's own.

`translated()` turns the runtime's errors into these with the client's database table, the
kit's leaves in place of the client's `AnswerRefused` (a test may tell the three apart; a
server's client cannot): every environment call into the runtime runs under it
(`WorkflowEnvironment.ops` hands out the runtime's own API, whose errors are the runtime's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final

from tether.client.errors import (
    AnswerRefused,
    ClientError,
    InvalidInput,
    RunNotFound,
    WaitTimedOut,
    WorkflowNotFound,
)
from tether.client.errors import ClientError as KitError
from tether.client.errors import TransportError as DatabaseUnavailable
from tether.client.runtime_errors import FROM_RUNTIME, RuntimeErrors
from tether.runtime import errors as rt

__all__ = [
    "AnswerConflict",
    "AnswerRejected",
    "DatabaseUnavailable",
    "InvalidInput",
    "KitError",
    "RunEnded",
    "RunFailed",
    "RunNotFound",
    "WaitNotOpen",
    "WaitTimedOut",
    "WorkflowNotFound",
    "translated",
]


class AnswerRejected(AnswerRefused):
    """The answer does not fit the wait; nothing changed.

    Args:
        message: what happened, in words (default: the class's first docstring line).
        violations: how the answer does not fit.

    Attributes:
        violations: one `field: problem` line per way the answer does not fit.
    """

    def __init__(self, message: str | None = None, violations: Iterable[Any] = ()) -> None:
        super().__init__(message, violations=violations)


class AnswerConflict(AnswerRefused):
    """The wait was already answered differently; the first answer stands.

    Args:
        message: what happened, in words (default: the class's first docstring line).
    """

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message)


class WaitNotOpen(AnswerRefused):
    """No open wait has that key, or several have that name (answer by key then).

    Args:
        message: what happened, in words (default: the class's first docstring line).
        open_waits: the keys of the waits open now.

    Attributes:
        open_waits: the keys of the waits open now.
    """

    def __init__(self, message: str | None = None, open_waits: Iterable[str] = ()) -> None:
        super().__init__(message, open_waits=open_waits)


class RunEnded(ClientError):
    """The run ended before what the test waited for (a wait to open, a signal to arrive).

    Args:
        message: what happened, in words (default: the class's first docstring line).
        run_id: the run, when known.
        status: how it ended, when known.

    Attributes:
        run_id: the run, or None.
        status: how it ended (completed, failed, …), or None.
    """

    def __init__(
        self, message: str | None = None, *, run_id: str | None = None, status: str | None = None
    ) -> None:
        super().__init__(message)
        self.run_id = run_id
        """The run, or None."""
        self.status = status
        """How it ended, or None."""


class RunFailed(ClientError):
    """The run ended without completing: failed, timed out, cancelled or terminated.

    Unlike the client's `RunFailed`, whose `error` is the task view's reading of a failure,
    a test gets the error exactly as the runtime recorded it.

    Args:
        run_id: the run.
        status: how it ended (`failed`, `timed_out`, `cancelled`, `terminated`).
        error: the error the runtime recorded.

    Attributes:
        run_id: the run.
        status: how it ended.
        error: the recorded error: a dict with `kind` (`workflow`, `rejected`, `timeout`,
            `cancelled`, `protocol`, …) and, as the kind has them, `type`, `message`,
            `reason`, `code`.
    """

    def __init__(self, run_id: str, status: str, error: Any) -> None:
        said = error.get("message") if isinstance(error, dict) else None
        super().__init__(f"run {run_id} ended {status}" + (f": {said}" if said else ""))
        self.run_id = run_id
        """The run."""
        self.status = status
        """How it ended."""
        self.error = error
        """The recorded error."""


#: The client's database table, with the kit's leaves for what it tells apart.
_FROM_RUNTIME: Final[Mapping[type[rt.TetherError], Callable[[Any], ClientError]]] = (
    MappingProxyType(
        {
            **FROM_RUNTIME,
            rt.AnswerRejected: lambda e: AnswerRejected(e.message, e.errors),
            rt.AnswerConflict: lambda e: AnswerConflict(e.message),
            rt.WaitNotOpen: lambda e: WaitNotOpen(e.message, e.open_keys),
            rt.RunEnded: lambda e: RunEnded(e.message),
        }
    )
)

_TRANSLATED: Final = RuntimeErrors(_FROM_RUNTIME)


def translated() -> RuntimeErrors:
    """`with translated(): …` — a runtime error raised in the block leaves as the kit's error
    (the entry of the table for its most specific class)."""
    return _TRANSLATED
