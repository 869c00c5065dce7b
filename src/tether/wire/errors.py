"""Runtime → JSON-RPC: the one table that turns a runtime error into the JSON-RPC error a
surface answers with, and the context manager that applies it at every call across the
boundary (tasks/*, tools/call, resources/read), as httpx maps transport errors with one table.

An error not in the table is not a protocol error: it leaves the block unchanged (the router
answers a stray one with a generic InternalError). Tool calls first turn the errors that are
the tool's own into tool results (tools/errors.py); what is left comes here. The tasks methods
add the task service's own errors to this table (tasks/errors.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType, TracebackType
from typing import Any, Final

from tether.jsonrpc.errors import InvalidParams, JsonRpcError, Unavailable
from tether.runtime import errors as runtime_errors
from tether.runtime.error_map import ErrorMapper

#: Builds the JSON-RPC error an error of its key's class stands for.
Table = Mapping[type[Exception], Callable[[Any], JsonRpcError]]

#: Runtime error class → the JSON-RPC error it stands for. Looked up along the raised error's
#: MRO (the most specific entry wins).
TO_JSONRPC: Final[Table] = MappingProxyType(
    {
        runtime_errors.InvalidInput: lambda exc: InvalidParams(exc.message),
        runtime_errors.Unavailable: lambda exc: Unavailable(exc.message),
    }
)


class JsonRpcErrors(ErrorMapper):
    """A stateless context manager, for `with` and `async with`: errors of its block that its
    table names leave as their JSON-RPC errors (the error they stand for as the cause); any
    other error leaves unchanged. One instance per table serves every use."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def to_jsonrpc(self, exc: BaseException) -> JsonRpcError | None:
        """The JSON-RPC error `exc` stands for (its cause set), or None when the table has none."""
        for cls in type(exc).__mro__:
            build = self.table.get(cls)
            if build is not None:
                error = build(exc)
                error.__cause__ = exc
                return error
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is not None:
            error = self.to_jsonrpc(exc)
            if error is not None:
                raise error


_RUNTIME: Final = JsonRpcErrors(TO_JSONRPC)


def to_jsonrpc(exc: BaseException) -> JsonRpcError | None:
    """The JSON-RPC error the runtime error `exc` stands for (its cause set), or None when the
    table has none."""
    return _RUNTIME.to_jsonrpc(exc)


def jsonrpc_errors() -> JsonRpcErrors:
    """`with jsonrpc_errors(): …` — runtime errors of the block leave as JSON-RPC errors.

    Raises:
        JsonRpcError: for an error the table names (InvalidParams, Unavailable).
    """
    return _RUNTIME
