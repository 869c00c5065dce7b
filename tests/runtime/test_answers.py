"""PURE: the one reader of answers as people and agents give them (`runtime/answers.py`),
which every surface hands its answer to: JSON as it is, a whole answer's text as JSON text, a
form's typed-in inputs as their fields' types; text that is not JSON is a string where the
schema takes one, and refused naming the field where it does not (our rule)."""

from __future__ import annotations

from typing import Any

import pytest

from tether.runtime import errors
from tether.runtime.answers import Form, Text, Value, read, takes_string

FORM = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "ok": {"type": "boolean"},
        "size": {"enum": ["s", "m"]},
        "level": {"enum": [1, 2]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "note": {"anyOf": [{"$ref": "#/$defs/Note"}, {"type": "null"}]},
    },
    "$defs": {"Note": {"type": "object"}},
}
TASK = {"key": "r:human_task:fill:3", "kind": "human_task", "name": "fill", "form": FORM}
GATE = {"key": "r:approval:gate:3", "kind": "approval", "name": "gate", "inputs": ["n"]}


def refused_fields(given: Any, wait: dict[str, Any] | None) -> list[str]:
    with pytest.raises(errors.AnswerRejected) as refused:
        read(given, wait)
    assert refused.value.message.startswith(f"{wait['key']}: " if wait else "")
    return [e.split(":")[0] for e in refused.value.errors]


def test_json_is_taken_as_it_is() -> None:
    """An answer that arrived as JSON keeps its types: a string stays a string."""
    assert read(Value({"count": "3"}), TASK) == {"count": "3"}
    assert read(Value("not json")) == "not json"


def test_a_whole_answer_typed_as_text_is_json_text() -> None:
    """JSON text is parsed, a quoted string included; text that is not JSON is the string
    itself where the schema takes a string (none, or a string type)."""
    sig = {"key": "r:signal:go:1", "kind": "signal", "name": "go", "schema": {}}
    assert read(Text('{"a": [1]}'), sig) == {"a": [1]}
    assert read(Text('"quoted"'), sig) == "quoted"
    assert read(Text("go ahead"), sig) == "go ahead"
    assert read(Text("go ahead"), {**sig, "schema": {"type": "string"}}) == "go ahead"
    assert read(Text("go ahead")) == "go ahead"  # the wait is not open: nothing to refuse


def test_text_that_is_not_json_is_refused_where_no_string_fits() -> None:
    """An object, a number, or a choice of numbers takes no plain text: refused naming the
    field the text came in."""
    sig = {"key": "r:signal:go:1", "kind": "signal", "name": "go", "schema": FORM}
    assert refused_fields(Text("approve"), GATE | {"schema": {"type": "object"}}) == ["(root)"]
    assert refused_fields(Text("{oops", "payload"), sig) == ["payload"]
    assert refused_fields(Text("x"), {**sig, "schema": {"enum": [1, 2]}}) == ["(root)"]


def test_typed_in_inputs_are_read_as_their_fields_types() -> None:
    """A string field as typed (digits too); integer, number and boolean from their text; a
    choice of numbers, a list and a referenced object as JSON; an input the form does not
    declare as typed."""
    texts = {
        "title": "007",
        "count": " 3 ",
        "ratio": "2.5",
        "ok": "true",
        "size": "m",
        "level": "2",
        "tags": '["a"]',
        "note": '{"x": 1}',
        "extra": "42",
    }
    assert read(Form("complete", texts=texts), TASK) == {
        "decision": "complete",
        "title": "007",
        "count": 3,
        "ratio": 2.5,
        "ok": True,
        "size": "m",
        "level": 2,
        "tags": ["a"],
        "note": {"x": 1},
        "extra": "42",
    }


def test_each_input_that_cannot_be_its_type_is_refused_by_name() -> None:
    """Every unreadable input is named, not only the first."""
    texts = {"count": "three", "ratio": "nan", "ok": "yes", "tags": "a, b", "title": "fine"}
    assert sorted(refused_fields(Form("complete", texts=texts), TASK)) == [
        "count",
        "ok",
        "ratio",
        "tags",
    ]


def test_an_approvals_inputs_are_strings_and_the_decision_keeps_its_envelope() -> None:
    """An approval's typed-in inputs are strings, digits too, and win over a JSON value of
    the same name; an input named `decision` goes into the `inputs` envelope; a rejection
    carries its reason."""
    form = Form("approve", values={"n": 1, "m": "x"}, texts={"n": "12", "decision": "go"})
    inputs = {"n": "12", "m": "x", "decision": "go"}
    assert read(form, GATE) == {"decision": "approve", "inputs": inputs}
    assert read(Form("reject", reason="no"), GATE) == {"decision": "reject", "reason": "no"}


def test_a_push_back_reads_its_inputs_as_the_feedback_form_declares_them() -> None:
    """A human task's push-back fields come from its feedback form, not its form."""
    task = {**TASK, "feedback": {"type": "object", "properties": {"count": {"type": "string"}}}}
    assert read(Form("push_back", texts={"count": "three"}), task) == {
        "decision": "push_back",
        "count": "three",
    }


@pytest.mark.parametrize(
    ("schema", "takes"),
    [
        (None, True),
        ({}, True),
        ({"type": "string"}, True),
        ({"type": ["integer", "string"]}, True),
        ({"type": "object"}, False),
        ({"enum": [1, "a"]}, True),
        ({"enum": [1, 2]}, False),
        ({"const": 3}, False),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, False),
        ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, True),
    ],
)
def test_whether_a_schema_takes_a_string(schema: Any, takes: bool) -> None:
    assert takes_string(schema) is takes
