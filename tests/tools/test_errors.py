"""The one runtime → tool error table (`tether.tools.errors`): a runtime error raised by a tool
call becomes a result with `isError: true` and the code clients branch on (Dagu's vocabulary),
except losing the database, which stays a JSON-RPC error (503) so the client retries. Our
choice (one error map per boundary)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from tether.jsonrpc import codes
from tether.jsonrpc.errors import Unavailable
from tether.runtime import errors as e
from tether.tools.errors import TO_TOOL_ERROR, tool_call, tool_error_result


async def call_raising(exc: Exception) -> dict[str, Any]:
    async def failing() -> dict[str, Any]:
        raise exc

    return await tool_call(failing())


def error_of(result: dict[str, Any] | None) -> dict[str, Any]:
    assert result is not None and result["isError"] is True
    error: dict[str, Any] = result["structuredContent"]["error"]
    assert result["content"] == [{"type": "text", "text": f"{error['code']}: {error['message']}"}]
    return error


@pytest.mark.parametrize(
    ("exc", "error"),
    [
        (e.WorkflowNotFound("w"), {"code": "resource_not_found", "message": "w"}),
        (e.ExecutionNotFound("x"), {"code": "resource_not_found", "message": "x"}),
        (e.UpdateNotFound("u"), {"code": "resource_not_found", "message": "u"}),
        (e.InvalidInput("i"), {"code": "invalid_tool_input", "message": "i"}),
        (
            e.InvalidInput("i", [{"loc": ["a"], "msg": "m"}]),
            {
                "code": "invalid_tool_input",
                "message": "i",
                "violations": [{"loc": ["a"], "msg": "m"}],
            },
        ),
        (
            e.AnswerRejected("a", ["too long"]),
            {"code": "invalid_tool_input", "message": "a", "violations": ["too long"]},
        ),
        (
            e.UpdateRejected("r", reason="no"),
            {"code": "invalid_tool_input", "message": "r", "reason": "no"},
        ),
        (e.WaitNotOpen("w", ["k1"]), {"code": "conflict", "message": "w", "open_keys": ["k1"]}),
        (e.RunEnded("ended"), {"code": "conflict", "message": "ended"}),
        (e.IdempotencyMismatch("m"), {"code": "conflict", "message": "m"}),
        (e.UpdateTimeout("t", "up_1"), {"code": "timeout", "message": "t", "update_id": "up_1"}),
        (
            e.UpdateFailed("f", {"type": "X"}),
            {"code": "update_failed", "message": "f", "update_error": {"type": "X"}},
        ),
        (e.UpdateFailed("f"), {"code": "update_failed", "message": "f"}),
        (e.TetherError("?"), {"code": "internal_error", "message": "?"}),
    ],
)
async def test_a_runtime_error_becomes_its_tool_error(exc: e.TetherError, error: Any) -> None:
    """The whole error object, snapshotted (details that are None are left out)."""
    assert error_of(await call_raising(exc)) == error


async def test_losing_the_database_is_a_json_rpc_error_not_a_tool_error() -> None:
    """Unavailable leaves tools/call as -31000 (HTTP 503), its cause kept."""
    down = e.Unavailable()
    with pytest.raises(Unavailable) as info:
        await call_raising(down)
    assert (info.value.code, info.value.http_status) == (codes.UNAVAILABLE, 503)
    assert info.value.__cause__ is down
    assert tool_error_result(down) is None


async def test_a_successful_call_and_other_errors_pass_through() -> None:
    async def ok() -> dict[str, Any]:
        return {"content": [], "isError": False}

    assert await tool_call(ok()) == {"content": [], "isError": False}
    with pytest.raises(ValueError, match="user code"):
        await call_raising(ValueError("user code"))


def test_every_runtime_operation_error_has_a_deliberate_entry() -> None:
    """Each TetherError class of the runtime finds an entry of its own or of a parent other
    than the catch-all base: a new runtime error needs a decision here."""
    classes = [
        c
        for c in vars(e).values()
        if inspect.isclass(c) and issubclass(c, e.TetherError) and c is not e.TetherError
    ]
    assert classes
    for cls in classes:
        entry = next(k for k in cls.__mro__ if k in TO_TOOL_ERROR)
        assert entry is not e.TetherError, cls
