"""PURE task views: status mapping, forms, TTL, results."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.factories import T0, execution_row
from tether.jsonrpc import codes
from tether.runtime import errors
from tether.storage.rows import STATUSES, ExecutionRow
from tether.tasks import views


def row(**kw: Any) -> ExecutionRow:
    base: dict[str, Any] = {
        "business_id": "b",
        "version": 3,
        "retention_s": 60,
        "updated_at": T0 + timedelta(seconds=5),
    }
    return execution_row(**{**base, **kw})


def view(r: ExecutionRow, *, elicitation: bool = True) -> dict[str, Any]:
    return views.task(r, r, (r,), elicitation=elicitation, poll_interval_ms=500)


SIGNAL_WAIT = {
    "key": "k1",
    "kind": "signal",
    "name": "go",
    "prompt": "Go?",
    "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
}


def test_a_parked_run_is_input_required_only_for_clients_that_declare_elicitation() -> None:
    """`input_required` with one elicitation per open wait, else `working` with a
    statusMessage naming the wait."""
    parked = row(status="waiting", waits=[SIGNAL_WAIT])
    with_form = view(parked)
    assert with_form["status"] == "input_required"
    request = with_form["inputRequests"]["k1"]
    assert request["method"] == "elicitation/create"
    assert request["params"]["requestedSchema"]["properties"] == {"ok": {"type": "boolean"}}
    without = view(parked, elicitation=False)
    assert without["status"] == "working" and "go" in without["statusMessage"]
    assert "inputRequests" not in without


def test_a_non_flat_answer_schema_becomes_one_json_payload_field() -> None:
    """Harvest's rule: a non-flat payload is asked as one required string field `payload`
    holding JSON text. Our rule for text that is not JSON (the same on every surface): a
    string where the schema takes one, else refused naming the field (it was taken as a
    string whatever the schema, then refused by the answer path's schema check)."""
    wait = {
        **SIGNAL_WAIT,
        "schema": {
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"type": "object"}}},
        },
    }
    form, is_payload = views.wait_form(wait)
    assert is_payload and form["required"] == ["payload"]
    assert views.answer_from_content(wait, {"payload": '{"items": [{}]}'}) == {"items": [{}]}
    with pytest.raises(errors.AnswerRejected) as refused:
        views.answer_from_content(wait, {"payload": "not json"})
    assert [e.split(":")[0] for e in refused.value.errors] == ["payload"]
    free = {**SIGNAL_WAIT, "schema": {}}
    assert views.answer_from_content(free, {"payload": "not json"}) == "not json"


def test_the_fallback_form_is_told_apart_from_a_flat_form_with_a_payload_field() -> None:
    """Our choice: a client recognises the fallback form (its answer goes as JSON text) by
    its single `payload` field's title, so a flat form whose one field is named `payload`
    still takes its fields as they are."""
    fallback, _ = views.wait_form({**SIGNAL_WAIT, "schema": {"type": "array"}})
    assert views.is_payload_form(fallback)
    flat, is_payload = views.wait_form(
        {**SIGNAL_WAIT, "schema": {"type": "object", "properties": {"payload": {"type": "string"}}}}
    )
    assert not is_payload and not views.is_payload_form(flat)
    assert not views.is_payload_form(None)
    assert not views.is_payload_form({"type": "object", "properties": {"other": {}}})


@given(st.sampled_from(STATUSES), st.sampled_from([None, "workflow", "protocol"]))
def test_every_row_maps_to_exactly_one_valid_task_shape(status: str, kind: str | None) -> None:
    """Every status maps to a task with the fields its status requires and none it forbids."""
    ended = status not in ("pending", "running", "waiting")
    r = row(
        status=status,
        ended_at=T0 + timedelta(seconds=9) if ended else None,
        error={"kind": kind, "code": -32003, "message": "m"} if kind else None,
        output={"x": 1},
    )
    t = view(r)
    assert t["status"] in ("working", "input_required", "completed", "failed", "cancelled")
    assert ("result" in t) == (t["status"] == "completed")
    assert ("error" in t) == (t["status"] == "failed")
    assert "resultType" not in t and "requestState" not in t
    assert t["lastUpdatedAt"] >= t["createdAt"]


def test_a_workflow_error_is_a_completed_tool_error_and_a_protocol_error_fails() -> None:
    """Spec (Tasks errors): a tool that ran and failed is completed + isError; only a JSON-RPC error
    is failed."""
    done = T0 + timedelta(seconds=1)
    tool_error = view(
        row(
            status="failed",
            ended_at=done,
            error={"kind": "workflow", "type": "ValueError", "message": "bad"},
        )
    )
    assert tool_error["status"] == "completed" and tool_error["result"]["isError"] is True
    failed = view(
        row(
            status="failed",
            ended_at=done,
            error={"kind": "protocol", "code": -32603, "message": "boom"},
        )
    )
    assert failed["status"] == "failed" and failed["error"] == {"code": -32603, "message": "boom"}


def test_a_reserved_code_a_workflow_raises_is_reported_as_internal_error() -> None:
    """Spec (error codes): no code from -32000..-32099 it does not define ever reaches the wire."""
    err = views.protocol_error({"kind": "protocol", "code": -32042, "message": "x"})
    assert err["code"] == codes.INTERNAL_ERROR and err["data"]["workflowCode"] == -32042
    assert views.protocol_error({"code": -32021, "message": "x"})["code"] == -32021
    assert views.protocol_error({"code": 42, "message": "x"})["code"] == 42


def test_ttl_is_null_while_live_and_counts_from_the_last_end_of_the_chain() -> None:
    """Harvest's TTL rule: null while live or without retention; afterwards from
    createdAt to the last end among rows sharing workflow and business id, plus retention."""
    assert view(row())["ttlMs"] is None
    assert view(row(status="completed", ended_at=T0, retention_s=None))["ttlMs"] is None
    first = row(status="continued_as_new", ended_at=T0 + timedelta(seconds=10))
    second = dataclasses.replace(
        first, id="ex_" + "b" * 32, status="completed", ended_at=T0 + timedelta(seconds=30)
    )
    ttl = views.task(first, second, (first, second), elicitation=False, poll_interval_ms=1)
    assert ttl["ttlMs"] == (30 + 60) * 1000
    live_successor = dataclasses.replace(second, status="running", ended_at=None)
    assert views.ttl_ms(first, (first, live_successor)) is None


def test_create_task_result_carries_only_task_fields() -> None:
    """Spec and official suite: resultType task, no result, error, inputRequests or requestState."""
    created = views.create_task_result(view(row(status="pending")))
    assert created["resultType"] == "task" and created["status"] == "working"
    assert not {"result", "error", "inputRequests", "requestState"} & set(created)
