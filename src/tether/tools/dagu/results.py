"""`dagu_execute` results: the successful output (text, resource links, structured content)
and the tool-level error `{code, message, action, targetType, dagName, dagRunId, field,
details}`, with the one table from runtime errors to the tool's error codes."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import orjson

from tether.runtime import errors as runtime_errors
from tether.specs.dag import DagSpecError

#: `dagu_execute`'s error codes, as Dagu names them (clients branch on these).
UNAUTHENTICATED: Final = "unauthenticated"
UNAUTHORIZED: Final = "unauthorized"
INVALID_TOOL_INPUT: Final = "invalid_tool_input"
RESOURCE_NOT_FOUND: Final = "resource_not_found"
CONFLICT: Final = "conflict"
RESOURCE_UNAVAILABLE: Final = "resource_unavailable"
INTERNAL_ERROR: Final = "internal_error"
CODES: Final = (
    UNAUTHENTICATED,
    UNAUTHORIZED,
    INVALID_TOOL_INPUT,
    RESOURCE_NOT_FOUND,
    CONFLICT,
    RESOURCE_UNAVAILABLE,
    INTERNAL_ERROR,
)


class DaguError(Exception):
    """A refused `dagu_execute` call: its code, message and, when one is at fault, field."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        field: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.details = dict(details) if details else None


#: Runtime error → the tool's error code (looked up along the MRO; the most specific wins).
CODE_OF: Final[Mapping[type[Exception], str]] = MappingProxyType(
    {
        runtime_errors.WorkflowNotFound: RESOURCE_NOT_FOUND,
        runtime_errors.ExecutionNotFound: RESOURCE_NOT_FOUND,
        runtime_errors.InvalidInput: INVALID_TOOL_INPUT,
        runtime_errors.AnswerRejected: INVALID_TOOL_INPUT,
        runtime_errors.Conflict: CONFLICT,
        runtime_errors.WaitNotOpen: CONFLICT,
        runtime_errors.Unavailable: RESOURCE_UNAVAILABLE,
        runtime_errors.TetherError: INTERNAL_ERROR,
        DagSpecError: INVALID_TOOL_INPUT,
    }
)


def translate(exc: Exception, field: str | None = None) -> DaguError:
    """The DaguError for a runtime (or DAG spec) error; `field` names the input at fault."""
    for cls in type(exc).__mro__:
        code = CODE_OF.get(cls)
        if code is not None:
            details = None
            if isinstance(exc, runtime_errors.AnswerRejected | runtime_errors.InvalidInput):
                details = {"violations": exc.errors} if exc.errors else None
            message = getattr(exc, "message", None) or str(exc)
            return DaguError(code, message, field=field, details=details)
    return DaguError(INTERNAL_ERROR, "the server failed while handling the action")


def error_result(err: DaguError, echo: Mapping[str, Any]) -> dict[str, Any]:
    error: dict[str, Any] = {"code": err.code, "message": err.message}
    error.update({k: v for k, v in echo.items() if v is not None})
    if err.field is not None:
        error["field"] = err.field
    if err.details:
        error["details"] = err.details
    return {
        "content": [{"type": "text", "text": f"{err.code}: {err.message}"}],
        "structuredContent": error,
        "isError": True,
    }


def success_result(text: str, out: dict[str, Any]) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if out.get("runUri"):
        content.append(_link(out["runUri"], "dag_run", "The DAG-run detail"))
        content.append(_link(out["logsUri"], "dag_run_logs", "The DAG-run's step logs"))
    content.append({"type": "text", "text": orjson.dumps(out).decode()})
    return {"content": content, "structuredContent": out, "isError": False}


def _link(uri: str, name: str, description: str) -> dict[str, Any]:
    return {
        "type": "resource_link",
        "uri": uri,
        "name": name,
        "description": description,
        "mimeType": "application/json",
    }
