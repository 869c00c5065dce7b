"""Runtime → tool error result: the one table that turns a runtime error raised by a tool call
into its tool-level error (a result with `isError: true` and the code clients branch on, in
Dagu's vocabulary), and the one function that applies it around every tool call.

An error that is not the tool's failure but the server's (Unavailable: the database is down)
is not a tool result: it leaves as its JSON-RPC error (tasks/errors.py, HTTP 503), so the client
retries.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

from tether.jsonrpc.errors import JsonRpcError
from tether.runtime import errors as e
from tether.tasks.errors import to_jsonrpc
from tether.tools.results import tool_error

ToolResult = dict[str, Any]


def _plain(code: str) -> Callable[[e.TetherError], ToolResult]:
    return lambda exc: tool_error(code, exc.message)


#: Runtime error class → its tool error result; None: not a tool-level error (see the module
#: docstring). Looked up along the raised error's MRO (the most specific entry wins).
TO_TOOL_ERROR: Final[Mapping[type[e.TetherError], Callable[[Any], ToolResult] | None]] = (
    MappingProxyType(
        {
            e.WorkflowNotFound: _plain("resource_not_found"),
            e.ExecutionNotFound: _plain("resource_not_found"),
            e.UpdateNotFound: _plain("resource_not_found"),
            e.InvalidInput: lambda exc: tool_error(
                "invalid_tool_input", exc.message, violations=exc.errors or None
            ),
            e.AnswerRejected: lambda exc: tool_error(
                "invalid_tool_input", exc.message, violations=exc.errors or None
            ),
            e.UpdateRejected: lambda exc: tool_error(
                "invalid_tool_input", exc.message, reason=exc.reason
            ),
            e.WaitNotOpen: lambda exc: tool_error(
                "conflict", exc.message, open_keys=exc.open_keys, open_waits=exc.open_waits or None
            ),
            e.Conflict: _plain("conflict"),
            e.UpdateTimeout: lambda exc: tool_error(
                "timeout", exc.message, update_id=exc.update_id
            ),
            e.UpdateFailed: lambda exc: tool_error(
                "update_failed", exc.message, update_error=exc.error
            ),
            e.Unavailable: None,
            e.TetherError: _plain("internal_error"),
        }
    )
)


def tool_error_result(exc: e.TetherError) -> ToolResult | None:
    """The tool error result for `exc`; None when it is not a tool-level error."""
    for cls in type(exc).__mro__:
        if cls in TO_TOOL_ERROR:
            build = TO_TOOL_ERROR[cls]
            return None if build is None else build(exc)
    return None  # unreachable for a TetherError: the table has the base class


async def tool_call(call: Awaitable[ToolResult]) -> ToolResult:
    """Await a tool call across the boundary: a runtime error becomes its tool error result.

    Raises:
        JsonRpcError: for a runtime error that is not the tool's (Unavailable → 503).
        TetherError: one neither table names (none today: the tool table has the base class).
    """
    try:
        return await call
    except e.TetherError as exc:
        result = tool_error_result(exc)
        if result is not None:
            return result
        error: JsonRpcError | None = to_jsonrpc(exc)
        if error is None:
            raise
        raise error from exc


class WorkflowProtocolError(JsonRpcError):
    """A workflow ended with a JSON-RPC error (its ProtocolError); a synchronous call answers
    with it, its code as the workflow chose it."""

    def __init__(self, code: int, message: str, data: Any) -> None:
        super().__init__(message, data)
        self._code = code

    def to_wire(self) -> dict[str, Any]:
        wire = super().to_wire()
        wire["code"] = self._code
        return wire
