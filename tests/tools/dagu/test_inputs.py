"""Dagu's execute-tool input rules, one table row per rule (pure: no database)."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from tether.tools.dagu.inputs import FIELDS, ExecuteInput, InputError, parse, partial

RUN = {"name": "etl", "dagRunId": "r1"}
DECIDE = {**RUN, "stepName": "gate"}

# (rule, arguments, field named by the refusal)
REFUSED: list[tuple[str, Any, str | None]] = [
    ("input must be an object", ["start"], None),
    ("unknown field", {"action": "start", "name": "etl", "colour": "red"}, "colour"),
    ("action required", {"name": "etl"}, "action"),
    ("action null is absent, so missing", {"action": None, "name": "etl"}, "action"),
    ("action blank is absent", {"action": "  ", "name": "etl"}, "action"),
    ("unknown action", {"action": "pause", "name": "etl"}, "action"),
    ("action wrong type", {"action": 1, "name": "etl"}, "action"),
    ("unknown targetType", {"action": "start", "name": "etl", "targetType": "x"}, "targetType"),
    ("targetType wrong type", {"action": "start", "name": "etl", "targetType": 2}, "targetType"),
    ("name required", {"action": "start"}, "name"),
    ("name blank is absent", {"action": "start", "name": " \t"}, "name"),
    ("name wrong type", {"action": "start", "name": ["etl"]}, "name"),
    (
        "spec required for inline_spec",
        {"action": "start", "name": "x", "targetType": "inline_spec"},
        "spec",
    ),
    (
        "spec forbidden for dag",
        {"action": "start", "name": "x", "targetType": "dag", "spec": "a"},
        "spec",
    ),
    ("spec forbidden for retry", {"action": "retry", **RUN, "spec": "steps: []"}, "spec"),
    ("spec wrong type", {"action": "start", "name": "x", "spec": {"steps": []}}, "spec"),
    (
        "targetType run refused for start",
        {"action": "start", "name": "etl", "targetType": "run"},
        "targetType",
    ),
    (
        "targetType run refused for enqueue",
        {"action": "enqueue", "name": "etl", "targetType": "run"},
        "targetType",
    ),
    (
        "retry requires targetType run",
        {"action": "retry", **RUN, "targetType": "dag"},
        "targetType",
    ),
    (
        "stop requires targetType run",
        {"action": "stop", **RUN, "targetType": "inline_spec"},
        "targetType",
    ),
    ("dagRunId required for retry", {"action": "retry", "name": "etl"}, "dagRunId"),
    ("dagRunId required for stop", {"action": "stop", "name": "etl"}, "dagRunId"),
    (
        "dagRunId required for approve",
        {"action": "approve", "name": "etl", "stepName": "g"},
        "dagRunId",
    ),
    (
        "dagRunId required for reject",
        {"action": "reject", "name": "etl", "stepName": "g"},
        "dagRunId",
    ),
    (
        "dagRunId required for push_back",
        {"action": "push_back", "name": "etl", "stepName": "g"},
        "dagRunId",
    ),
    ("dagRunId blank is absent", {"action": "stop", "name": "etl", "dagRunId": "  "}, "dagRunId"),
    ("dagRunId wrong type", {"action": "stop", "name": "etl", "dagRunId": 7}, "dagRunId"),
    ("dagRunId bad characters", {"action": "stop", "name": "etl", "dagRunId": "a/b"}, "dagRunId"),
    ("params wrong type", {"action": "start", "name": "etl", "params": ["A=1"]}, "params"),
    ("params only for start/enqueue", {"action": "stop", **RUN, "params": "A=1"}, "params"),
    ("queue only for enqueue", {"action": "start", "name": "etl", "queue": "q"}, "queue"),
    ("queue wrong type", {"action": "enqueue", "name": "etl", "queue": 1}, "queue"),
    (
        "singleton only for start/enqueue",
        {"action": "retry", **RUN, "singleton": False},
        "singleton",
    ),
    ("singleton wrong type", {"action": "start", "name": "etl", "singleton": "yes"}, "singleton"),
    ("noReuse only for start/enqueue", {"action": "stop", **RUN, "noReuse": False}, "noReuse"),
    ("noReuse wrong type", {"action": "start", "name": "etl", "noReuse": 0}, "noReuse"),
    ("profile only for start/enqueue", {"action": "stop", **RUN, "profile": "p"}, "profile"),
    ("labels only for start/enqueue, even []", {"action": "retry", **RUN, "labels": []}, "labels"),
    ("labels wrong type", {"action": "start", "name": "etl", "labels": "a=b"}, "labels"),
    ("labels items must be strings", {"action": "start", "name": "etl", "labels": [1]}, "labels"),
    ("stepName not for start", {"action": "start", "name": "etl", "stepName": "s"}, "stepName"),
    ("stepName not for stop", {"action": "stop", **RUN, "stepName": "s"}, "stepName"),
    ("stepName required for approve", {"action": "approve", **RUN}, "stepName"),
    ("stepName required for reject", {"action": "reject", **RUN}, "stepName"),
    ("stepName required for push_back", {"action": "push_back", **RUN}, "stepName"),
    (
        "includeDownstream only for retry, even false",
        {"action": "stop", **RUN, "includeDownstream": False},
        "includeDownstream",
    ),
    (
        "includeDownstream requires stepName (Dagu names stepName)",
        {"action": "retry", **RUN, "includeDownstream": True},
        "stepName",
    ),
    (
        "includeDownstream wrong type",
        {"action": "retry", **RUN, "stepName": "s", "includeDownstream": "true"},
        "includeDownstream",
    ),
    (
        "subDAGRunId only for decisions",
        {"action": "retry", **RUN, "subDAGRunId": "c1"},
        "subDAGRunId",
    ),
    ("attemptId only for decisions", {"action": "stop", **RUN, "attemptId": "a1"}, "attemptId"),
    ("attemptId wrong type", {"action": "approve", **DECIDE, "attemptId": 5}, "attemptId"),
    ("inputs only for approve/push_back", {"action": "reject", **DECIDE, "inputs": {}}, "inputs"),
    ("inputs not an object", {"action": "approve", **DECIDE, "inputs": ["a"]}, "inputs"),
    ("inputs string is not an object", {"action": "approve", **DECIDE, "inputs": "{}"}, "inputs"),
    ("reason only for reject", {"action": "approve", **DECIDE, "reason": "no"}, "reason"),
    ("wait wrong type", {"action": "stop", **RUN, "wait": "true"}, "wait"),
    (
        "an inline spec's name follows Dagu's DAG-name rule",
        {"action": "start", "name": "../../etc/passwd", "spec": "steps: []"},
        "name",
    ),
    (
        "an inline spec's name has at most 40 characters",
        {"action": "enqueue", "name": "n" * 41, "spec": "steps: []"},
        "name",
    ),
    (
        "waitTimeoutSeconds requires wait",
        {"action": "stop", **RUN, "waitTimeoutSeconds": 5},
        "waitTimeoutSeconds",
    ),
    (
        "waitTimeoutSeconds requires wait true",
        {"action": "stop", **RUN, "wait": False, "waitTimeoutSeconds": 5},
        "waitTimeoutSeconds",
    ),
    (
        "waitTimeoutSeconds below 1",
        {"action": "stop", **RUN, "wait": True, "waitTimeoutSeconds": 0},
        "waitTimeoutSeconds",
    ),
    (
        "waitTimeoutSeconds above 300",
        {"action": "stop", **RUN, "wait": True, "waitTimeoutSeconds": 301},
        "waitTimeoutSeconds",
    ),
    (
        "waitTimeoutSeconds not integral",
        {"action": "stop", **RUN, "wait": True, "waitTimeoutSeconds": 1.5},
        "waitTimeoutSeconds",
    ),
    (
        "waitTimeoutSeconds boolean",
        {"action": "stop", **RUN, "wait": True, "waitTimeoutSeconds": True},
        "waitTimeoutSeconds",
    ),
]


@pytest.mark.parametrize(("rule", "args", "field"), REFUSED, ids=[r[0] for r in REFUSED])
def test_refused(rule: str, args: Any, field: str | None) -> None:
    with pytest.raises(InputError) as info:
        parse(args)
    assert info.value.field == field, (rule, info.value.message)


# (rule, arguments, expected attributes of the parsed input)
ACCEPTED: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "start defaults to targetType dag",
        {"action": "start", "name": "etl"},
        {"target_type": "dag", "wait": False},
    ),
    (
        "spec implies inline_spec",
        {"action": "start", "name": "x", "spec": "steps: []"},
        {"target_type": "inline_spec"},
    ),
    ("run actions default to run", {"action": "stop", **RUN}, {"target_type": "run"}),
    (
        "explicit run accepted",
        {"action": "retry", **RUN, "targetType": "run"},
        {"target_type": "run"},
    ),
    (
        "null is absent",
        {"action": "start", "name": "etl", "queue": None, "stepName": None, "inputs": None},
        {"queue": None},
    ),
    (
        "strings trimmed",
        {"action": "stop", "name": "  etl ", "dagRunId": " r1\n"},
        {"name": "etl", "dag_run_id": "r1"},
    ),
    (
        "an inline spec may be named as Dagu allows",
        {"action": "start", "name": "9lives.v2", "spec": "steps: []"},
        {"name": "9lives.v2"},
    ),
    (
        "spec not trimmed",
        {"action": "start", "name": "x", "spec": "  steps: []\n"},
        {"spec": "  steps: []\n"},
    ),
    (
        "empty after trim is absent (queue on start)",
        {"action": "start", "name": "etl", "queue": "  "},
        {"queue": None},
    ),
    (
        "object params canonical compact JSON",
        {"action": "start", "name": "etl", "params": {"B": 2, "A": "x y"}},
        {"params": '{"A":"x y","B":2}'},
    ),
    (
        "string params kept trimmed",
        {"action": "enqueue", "name": "etl", "params": " A=1 B "},
        {"params": "A=1 B"},
    ),
    (
        "enqueue takes queue",
        {"action": "enqueue", "name": "etl", "queue": "q1", "singleton": True},
        {"queue": "q1", "singleton": True},
    ),
    (
        "start flags",
        {
            "action": "start",
            "name": "etl",
            "noReuse": True,
            "profile": "p",
            "labels": [" team=a ", "n"],
        },
        {"no_reuse": True, "profile": "p", "labels": ("team=a", "n")},
    ),
    (
        "dagRunId override on start",
        {"action": "start", "name": "etl", "dagRunId": "mine-1"},
        {"dag_run_id": "mine-1"},
    ),
    (
        "retry with step and downstream",
        {"action": "retry", **RUN, "stepName": "load", "includeDownstream": True},
        {"step_name": "load", "include_downstream": True},
    ),
    (
        "approve with inputs and attempt",
        {
            "action": "approve",
            **DECIDE,
            "inputs": {"T": "x"},
            "attemptId": "a1",
            "subDAGRunId": "c1",
        },
        {"inputs": {"T": "x"}, "attempt_id": "a1", "sub_dag_run_id": "c1"},
    ),
    ("reject with reason", {"action": "reject", **DECIDE, "reason": " no "}, {"reason": "no"}),
    ("push_back with inputs", {"action": "push_back", **DECIDE, "inputs": {}}, {"inputs": {}}),
    (
        "wait default timeout 60",
        {"action": "stop", **RUN, "wait": True},
        {"wait": True, "wait_timeout_s": 60},
    ),
    (
        "wait timeout bounds 1",
        {"action": "stop", **RUN, "wait": True, "waitTimeoutSeconds": 1},
        {"wait_timeout_s": 1},
    ),
    (
        "wait timeout bounds 300",
        {"action": "stop", **RUN, "wait": True, "waitTimeoutSeconds": 300},
        {"wait_timeout_s": 300},
    ),
    (
        "wait false accepted for any action",
        {"action": "start", "name": "etl", "wait": False},
        {"wait": False},
    ),
]


@pytest.mark.parametrize(("rule", "args", "expected"), ACCEPTED, ids=[r[0] for r in ACCEPTED])
def test_accepted(rule: str, args: dict[str, Any], expected: dict[str, Any]) -> None:
    parsed = parse(args)
    assert isinstance(parsed, ExecuteInput)
    for attr, value in expected.items():
        assert getattr(parsed, attr) == value, (rule, attr)


def test_every_field_of_the_table_is_covered() -> None:
    """Each field the input rules name appears in a refused row (a rule that can fail)."""
    named = {field for _, _, field in REFUSED}
    assert set(FIELDS) <= named
    assert set(FIELDS) == {
        "action",
        "targetType",
        "name",
        "spec",
        "dagRunId",
        "params",
        "queue",
        "singleton",
        "noReuse",
        "profile",
        "labels",
        "stepName",
        "includeDownstream",
        "subDAGRunId",
        "inputs",
        "reason",
        "attemptId",
        "wait",
        "waitTimeoutSeconds",
    }


def test_an_input_error_echoes_the_default_target_type_as_the_seed_example() -> None:
    """The contract's example error: a retry missing dagRunId echoes targetType run."""
    args = {"action": "retry", "name": "nightly-report"}
    with pytest.raises(InputError) as info:
        parse(args)
    assert info.value.message == "The dagRunId field is required."
    assert partial(args) == {"action": "retry", "targetType": "run", "dagName": "nightly-report"}
    assert partial({"action": "start", "spec": " steps: []"})["targetType"] == "inline_spec"
    assert partial({"action": "enqueue", "name": "x", "colour": 1})["targetType"] == "dag"
    assert "targetType" not in partial({"action": "start", "targetType": "nope"})
    assert "targetType" not in partial({"action": "pause", "name": "x"})


def test_echoing_a_refused_input_does_not_copy_its_spec() -> None:
    """Our choice: the echo reads `spec` only to tell whether it is blank, without a copy (a
    refused spec can be as large as the HTTP body limit)."""
    spec = "name: x\n" + "y" * 1_000_000 + "\n"
    args = {"action": "start", "name": "x", "spec": spec}
    tracemalloc.start()
    try:
        echo = partial(args)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert echo["targetType"] == "inline_spec"
    assert peak < len(spec) // 10
