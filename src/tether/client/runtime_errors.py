"""The runtime's errors as the client's: one table, and the context manager that applies it.
The database transport runs every operation under it; the test kit (`tether.testing.errors`)
applies the same table with its finer answer errors in place of `AnswerRefused`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType, TracebackType
from typing import Any, Final

from tether.client import errors
from tether.runtime import errors as rt

#: Runtime error class → the client error it stands for, looked up along the raised error's
#: MRO (the most specific entry wins).
FROM_RUNTIME: Final[Mapping[type[rt.TetherError], Callable[[Any], errors.ClientError]]] = (
    MappingProxyType(
        {
            rt.ExecutionNotFound: lambda e: errors.RunNotFound(e.message),
            rt.WorkflowNotFound: lambda e: errors.WorkflowNotFound(e.message),
            rt.InvalidInput: lambda e: errors.InvalidInput(e.message, e.errors),
            rt.IdempotencyMismatch: lambda e: errors.StartConflict(e.message, e.execution_id),
            rt.AnswerRejected: lambda e: errors.AnswerRefused(e.message, violations=e.errors),
            rt.WaitNotOpen: lambda e: errors.AnswerRefused(e.message, open_waits=e.open_keys),
            rt.AnswerConflict: lambda e: errors.AnswerRefused(e.message),
            rt.Unavailable: lambda e: errors.TransportError(e.message),
            rt.TetherError: lambda e: errors.ClientError(e.message),
        }
    )
)


class RuntimeErrors:
    """`with RuntimeErrors(table): …` — a runtime error of the block leaves as the error
    `table` builds for it (the entry of its most specific class; `table` maps TetherError
    itself, so every runtime error has one)."""

    __slots__ = ("_table",)

    def __init__(
        self, table: Mapping[type[rt.TetherError], Callable[[Any], errors.ClientError]]
    ) -> None:
        self._table = table

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not isinstance(exc, rt.TetherError):
            return
        for cls in type(exc).__mro__:
            build = self._table.get(cls)
            if build is not None:
                raise build(exc) from exc
