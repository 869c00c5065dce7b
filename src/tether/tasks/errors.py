"""The tasks/* boundary: the task service's own errors as JSON-RPC errors, added to the one
runtime → JSON-RPC table (`tether.wire.errors`) so the tasks methods apply one table to what
the task service raises (its own errors, and the runtime's that pass through it)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from tether.jsonrpc.errors import InvalidParams, JsonRpcError
from tether.tasks.service import TaskInputRefused, TaskNotFound
from tether.wire import errors as wire_errors
from tether.wire.errors import JsonRpcErrors, Table

NOT_FOUND: Final = "Failed to retrieve task: Task not found"

#: Domain error class → the JSON-RPC error it stands for: the task service's errors, then the
#: runtime's (`tether.wire.errors.TO_JSONRPC`). Looked up along the raised error's MRO (the
#: most specific entry wins).
TO_JSONRPC: Final[Table] = MappingProxyType(
    {
        TaskNotFound: lambda exc: InvalidParams(NOT_FOUND),
        TaskInputRefused: lambda exc: InvalidParams(exc.message, exc.data),
        **wire_errors.TO_JSONRPC,
    }
)

_TASKS: Final = JsonRpcErrors(TO_JSONRPC)


def to_jsonrpc(exc: BaseException) -> JsonRpcError | None:
    """The JSON-RPC error `exc` stands for (its cause set), or None when the table has none."""
    return _TASKS.to_jsonrpc(exc)


def jsonrpc_errors() -> JsonRpcErrors:
    """`with jsonrpc_errors(): …` — domain errors of the block leave as JSON-RPC errors.

    Raises:
        JsonRpcError: for an error the table names (InvalidParams, Unavailable).
    """
    return _TASKS
