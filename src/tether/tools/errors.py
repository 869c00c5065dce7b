"""Runtime → tool error result: the one table that turns a runtime error raised by a tool call
into its tool-level error (a result with `isError: true` and the code clients branch on, in
Dagu's vocabulary), and the one function that applies it around every tool call.

An error that is not the tool's failure but the server's (Unavailable: the database is down)
is not a tool result: it leaves as its JSON-RPC error (wire/errors.py, HTTP 503), so the client
retries.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

from tether.jsonrpc.errors import JsonRpcError
from tether.runtime import errors as runtime_errors
from tether.tools.results import tool_error
from tether.wire.errors import to_jsonrpc

ToolResult = dict[str, Any]


def _plain(code: str) -> Callable[[runtime_errors.TetherError], ToolResult]:
    return lambda exc: tool_error(code, exc.message)


#: Runtime error class → its tool error result; None: not a tool-level error (see the module
#: docstring). Looked up along the raised error's MRO (the most specific entry wins).
TO_TOOL_ERROR: Final[
    Mapping[type[runtime_errors.TetherError], Callable[[Any], ToolResult] | None]
] = MappingProxyType(
    {
        runtime_errors.WorkflowNotFound: _plain("resource_not_found"),
        runtime_errors.ExecutionNotFound: _plain("resource_not_found"),
        runtime_errors.UpdateNotFound: _plain("resource_not_found"),
        runtime_errors.InvalidInput: lambda exc: tool_error(
            "invalid_tool_input", exc.message, violations=exc.errors or None
        ),
        runtime_errors.AnswerRejected: lambda exc: tool_error(
            "invalid_tool_input", exc.message, violations=exc.errors or None
        ),
        runtime_errors.UpdateRejected: lambda exc: tool_error(
            "invalid_tool_input", exc.message, reason=exc.reason
        ),
        runtime_errors.WaitNotOpen: lambda exc: tool_error(
            "conflict", exc.message, open_keys=exc.open_keys, open_waits=exc.open_waits or None
        ),
        runtime_errors.Conflict: _plain("conflict"),
        runtime_errors.UpdateTimeout: lambda exc: tool_error(
            "timeout", exc.message, update_id=exc.update_id
        ),
        runtime_errors.UpdateFailed: lambda exc: tool_error(
            "update_failed", exc.message, update_error=exc.error
        ),
        runtime_errors.Unavailable: None,
        runtime_errors.TetherError: _plain("internal_error"),
    }
)


def tool_error_result(exc: runtime_errors.TetherError) -> ToolResult | None:
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
    except runtime_errors.TetherError as exc:
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
