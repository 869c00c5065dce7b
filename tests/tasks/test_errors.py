"""The tasks/* boundary's table (`tether.tasks.errors`: the task service's errors added to the
runtime's, `tether.wire.errors`): each domain error leaves a `jsonrpc_errors()` block as its
JSON-RPC error (code and HTTP status as the wire needs them, the domain error kept as the
cause); anything the table does not name leaves unchanged. Our choice (one error map per
boundary). The runtime's entries and the lookup along the MRO are tested with the runtime's
table (tests/wire/test_errors.py), which also checks that this table holds each of them."""

from __future__ import annotations

import pytest

from tether.jsonrpc import codes
from tether.jsonrpc.errors import InvalidParams, JsonRpcError
from tether.runtime import errors as e
from tether.tasks.errors import NOT_FOUND, TO_JSONRPC, jsonrpc_errors, to_jsonrpc
from tether.tasks.service import TaskInputRefused, TaskNotFound


def mapped(exc: Exception) -> JsonRpcError:
    with pytest.raises(JsonRpcError) as info, jsonrpc_errors():
        raise exc
    assert info.value.__cause__ is exc
    return info.value


def test_an_unknown_task_is_invalid_params_with_the_spec_message() -> None:
    """ext-tasks: an unknown or expired taskId is -32602 (HTTP 200, a semantic error)."""
    error = mapped(TaskNotFound())
    assert type(error) is InvalidParams
    assert (error.code, error.http_status, error.message) == (codes.INVALID_PARAMS, 200, NOT_FOUND)


def test_refused_input_keeps_its_message_and_data() -> None:
    error = mapped(TaskInputRefused("input refused: no", {"key": "k"}))
    assert error.to_wire() == {
        "code": codes.INVALID_PARAMS,
        "message": "input refused: no",
        "data": {"key": "k"},
    }


def test_errors_the_table_does_not_name_leave_unchanged() -> None:
    """A conflict on tasks/* is not a protocol error the table knows: the router answers it."""
    conflict = e.RunEnded()
    with pytest.raises(e.RunEnded) as info, jsonrpc_errors():
        raise conflict
    assert info.value is conflict
    assert to_jsonrpc(ValueError("x")) is None


def test_every_entry_maps_to_a_json_rpc_error() -> None:
    """Each table entry builds a JsonRpcError from an instance of its key."""
    samples: dict[type[Exception], Exception] = {
        TaskNotFound: TaskNotFound(),
        TaskInputRefused: TaskInputRefused("m"),
        e.InvalidInput: e.InvalidInput(),
        e.Unavailable: e.Unavailable(),
    }
    assert set(samples) == set(TO_JSONRPC)
    assert all(isinstance(to_jsonrpc(exc), JsonRpcError) for exc in samples.values())
