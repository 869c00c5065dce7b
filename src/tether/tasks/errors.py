"""Runtime → JSON-RPC: the one table that turns a domain error (from the runtime, or from the
task service) into the JSON-RPC error a surface answers with, and the one context manager that
applies it at every call across the boundary (tasks/*, tools/call, resources/read), as httpx
maps transport errors with one table.

An error not in the table is not a protocol error: it leaves the block unchanged (the router
answers a stray one with a generic InternalError). Tool calls first turn the errors that are
the tool's own into tool results (tools/errors.py); what is left comes here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType, TracebackType
from typing import Any, Final

from tether.jsonrpc.errors import InvalidParams, JsonRpcError, Unavailable
from tether.runtime import errors as runtime_errors
from tether.tasks.service import TaskInputRefused, TaskNotFound

NOT_FOUND: Final = "Failed to retrieve task: Task not found"

#: Domain error class → the JSON-RPC error it stands for. Looked up along the raised error's MRO
#: (the most specific entry wins).
TO_JSONRPC: Final[Mapping[type[Exception], Callable[[Any], JsonRpcError]]] = MappingProxyType(
    {
        TaskNotFound: lambda exc: InvalidParams(NOT_FOUND),
        TaskInputRefused: lambda exc: InvalidParams(exc.message, exc.data),
        runtime_errors.InvalidInput: lambda exc: InvalidParams(exc.message),
        runtime_errors.Unavailable: lambda exc: Unavailable(exc.message),
    }
)


def to_jsonrpc(exc: BaseException) -> JsonRpcError | None:
    """The JSON-RPC error `exc` stands for (its cause set), or None when the table has none."""
    for cls in type(exc).__mro__:
        build = TO_JSONRPC.get(cls)
        if build is not None:
            error = build(exc)
            error.__cause__ = exc
            return error
    return None


class _Mapped:
    """A stateless context manager, for `with` and `async with`: errors of its block that the
    table names leave as their JSON-RPC errors. A class rather than a generator: it wraps every
    read (tasks/get is the hot path), and one instance serves every use."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is not None:
            error = to_jsonrpc(exc)
            if error is not None:
                raise error

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(kind, exc, tb)


_MAPPED: Final = _Mapped()


def jsonrpc_errors() -> _Mapped:
    """`with jsonrpc_errors(): …` — domain errors of the block leave as JSON-RPC errors.

    Raises:
        JsonRpcError: for an error the table names (InvalidParams, Unavailable).
    """
    return _MAPPED
