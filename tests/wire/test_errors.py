"""The one runtime → JSON-RPC table (`tether.wire.errors`) that every JSON-RPC surface applies
to what the runtime raises (tools/call, resources/read; tasks/* adds its own errors to it):
each runtime error it names leaves a `jsonrpc_errors()` block as its JSON-RPC error (code and
HTTP status as the wire needs them, the runtime error kept as the cause); anything it does not
name leaves unchanged. Our choice (one error map per boundary)."""

from __future__ import annotations

import pytest

from tether.jsonrpc import codes
from tether.jsonrpc.errors import InvalidParams, JsonRpcError, Unavailable
from tether.runtime import errors as e
from tether.tasks import errors as task_errors
from tether.tasks.service import TaskNotFound
from tether.wire.errors import TO_JSONRPC, jsonrpc_errors, to_jsonrpc


def mapped(exc: Exception) -> JsonRpcError:
    with pytest.raises(JsonRpcError) as info, jsonrpc_errors():
        raise exc
    assert info.value.__cause__ is exc
    return info.value


def test_invalid_input_and_its_subclasses_are_invalid_params() -> None:
    """The lookup walks the raised error's MRO: a subclass finds its parent's entry."""

    class Narrower(e.InvalidInput):
        pass

    assert mapped(e.InvalidInput("bad body")).to_wire() == {
        "code": codes.INVALID_PARAMS,
        "message": "bad body",
    }
    assert type(mapped(Narrower("narrower"))) is InvalidParams


def test_losing_the_database_is_unavailable_503() -> None:
    """With the database down a surface answers -31000 with HTTP 503 (retry)."""
    error = mapped(e.Unavailable())
    assert type(error) is Unavailable
    assert (error.code, error.http_status) == (codes.UNAVAILABLE, 503)


async def test_the_mapping_applies_to_async_with_too() -> None:
    with pytest.raises(Unavailable):
        async with jsonrpc_errors():
            raise e.Unavailable()


def test_errors_the_table_does_not_name_leave_unchanged() -> None:
    """A task service's error is not the runtime's: outside tasks/* it leaves as it is (the
    router answers a stray one), as does a runtime error the table does not name."""
    for raised in (TaskNotFound(), e.RunEnded()):
        with pytest.raises(type(raised)) as info, jsonrpc_errors():
            raise raised
        assert info.value is raised
    assert to_jsonrpc(ValueError("x")) is None


def test_the_table_names_runtime_errors_only_and_tasks_extends_it() -> None:
    """The runtime's entries are written once, here; the tasks boundary's table holds each of
    them as it is, beside the task service's own."""
    assert set(TO_JSONRPC) == {e.InvalidInput, e.Unavailable}
    assert all(issubclass(cls, e.TetherError) for cls in TO_JSONRPC)
    assert all(task_errors.TO_JSONRPC[cls] is build for cls, build in TO_JSONRPC.items())
