"""What `tether.testing` raises: its own tree, so a test catches kit classes, never the
runtime's internal ones.

    KitError                 base class; also a failure no subclass names
     ├── RunNotFound             no run has that id
     ├── WorkflowNotFound        the App has no workflow of that name
     ├── InvalidInput            the workflow refused the input; `.violations`
     ├── AnswerRejected          the answer does not fit the wait; `.violations`
     ├── AnswerConflict          the wait was already answered differently
     ├── WaitNotOpen             no open wait has that key (or several have that name);
     │                           `.open_waits`
     ├── RunEnded                the run ended before the wait the test waited for opened,
     │                           or before a signal reached it
     ├── RunFailed               `result()`: the run ended without completing; `.status`,
     │                           `.error`
     ├── DatabaseUnavailable     the test server cannot be reached, or refused
     └── WaitTimedOut            a wait ran out of wall-clock time (also a TimeoutError)

`translated()` turns the runtime's errors into these with one table; every environment call
into the runtime runs under it (`WorkflowEnvironment.ops` hands out the runtime's own API,
whose errors are the runtime's).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, Final

from tether.runtime import errors as rt


def _lines(violations: Iterable[Any]) -> tuple[str, ...]:
    """Problems as `field: problem` lines (validation error dicts joined by their `loc`)."""
    out: list[str] = []
    for v in violations:
        if isinstance(v, dict):
            where = ".".join(str(p) for p in v.get("loc") or ())
            out.append(f"{where or '(root)'}: {v.get('msg', '')}")
        else:
            out.append(str(v))
    return tuple(out)


class KitError(Exception):
    """A test kit call failed.

    Args:
        message: what happened, in words (default: the class's first docstring line).

    Attributes:
        message: what happened, in words.
    """

    def __init__(self, message: str | None = None) -> None:
        self.message = message or (type(self).__doc__ or "").strip().splitlines()[0]
        """What happened, in words."""
        super().__init__(self.message)


class RunNotFound(KitError):
    """No run has that id.

    Args:
        message: what happened, in words (default: the class's first docstring line).
    """


class WorkflowNotFound(KitError):
    """The App has no workflow of that name.

    Args:
        message: what happened, in words (default: the class's first docstring line).
    """


class InvalidInput(KitError):
    """The workflow refused the input.

    Args:
        message: what happened, in words (default: the class's first docstring line).
        violations: the problems found.

    Attributes:
        violations: one `field: problem` line per problem found.
    """

    def __init__(self, message: str | None = None, violations: Iterable[Any] = ()) -> None:
        super().__init__(message)
        self.violations = _lines(violations)
        """One `field: problem` line per problem found."""


class AnswerRejected(KitError):
    """The answer does not fit the wait; nothing changed.

    Args:
        message: what happened, in words (default: the class's first docstring line).
        violations: how the answer does not fit.

    Attributes:
        violations: one `field: problem` line per way the answer does not fit.
    """

    def __init__(self, message: str | None = None, violations: Iterable[Any] = ()) -> None:
        super().__init__(message)
        self.violations = _lines(violations)
        """One `field: problem` line per way the answer does not fit."""


class AnswerConflict(KitError):
    """The wait was already answered differently; the first answer stands.

    Args:
        message: what happened, in words (default: the class's first docstring line).
    """


class WaitNotOpen(KitError):
    """No open wait has that key, or several have that name (answer by key then).

    Args:
        message: what happened, in words (default: the class's first docstring line).
        open_waits: the keys of the waits open now.

    Attributes:
        open_waits: the keys of the waits open now.
    """

    def __init__(self, message: str | None = None, open_waits: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.open_waits = tuple(open_waits)
        """The keys of the waits open now."""


class RunEnded(KitError):
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


class RunFailed(KitError):
    """The run ended without completing: failed, timed out, cancelled or terminated.

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


class DatabaseUnavailable(KitError):
    """The test server cannot be reached, or refused the statement.

    Args:
        message: what happened, in words (default: the class's first docstring line).
    """


class WaitTimedOut(KitError, TimeoutError):
    """A wait ran out of wall-clock time; the message says what it waited for and where the
    run stood.

    Args:
        message: what happened, in words (default: the class's first docstring line).
    """


_FROM_RUNTIME: Final[Mapping[type[rt.TetherError], Callable[[Any], KitError]]] = MappingProxyType(
    {
        rt.ExecutionNotFound: lambda e: RunNotFound(e.message),
        rt.WorkflowNotFound: lambda e: WorkflowNotFound(e.message),
        rt.InvalidInput: lambda e: InvalidInput(e.message, e.errors),
        rt.AnswerRejected: lambda e: AnswerRejected(e.message, e.errors),
        rt.AnswerConflict: lambda e: AnswerConflict(e.message),
        rt.WaitNotOpen: lambda e: WaitNotOpen(e.message, e.open_keys),
        rt.RunEnded: lambda e: RunEnded(e.message),
        rt.Unavailable: lambda e: DatabaseUnavailable(e.message),
        rt.TetherError: lambda e: KitError(e.message),
    }
)


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Raise the kit's error for a runtime error raised inside the block (the most specific
    entry of the table for its class)."""
    try:
        yield
    except rt.TetherError as exc:
        for cls in type(exc).__mro__:
            make = _FROM_RUNTIME.get(cls)
            if make is not None:
                raise make(exc) from exc
        raise  # pragma: no cover — TetherError itself is in the table
