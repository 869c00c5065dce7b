"""`create_workflow` plans: what is kept, what is left out and reported, what is refused."""

from __future__ import annotations

import pytest

from tether.specs.realm import (
    InvalidReference,
    InvalidValue,
    RealmSpecError,
    UnknownField,
    plan_workflow,
)

TRIP_BUDGET: dict[str, object] = {
    "metadata": {
        "name": "trip-budget",
        "description": "Price a team offsite.",
        "task_description": "Note each cost, total them per person, then write the summary.",
    },
    "steps": [
        {
            "id": "collect",
            "description": "Note every cost the offsite will have.",
            "input_schema": {
                "type": "object",
                "additionalProperties": False,
                "required": ["costs"],
                "properties": {"costs": {"type": "array", "items": {"type": "number"}}},
            },
        },
        {"id": "group", "description": "Total the costs per person.", "depends_on": ["collect"]},
        {
            "id": "write",
            "description": "Write the budget summary.",
            "depends_on": ["group"],
            "structured_output": "strict",
            "llm_timeout_seconds": 60,
        },
    ],
}


def test_a_plan_becomes_a_workflow_of_agent_steps() -> None:
    spec, diagnostics = plan_workflow(TRIP_BUDGET)
    assert diagnostics == []
    assert spec.id.startswith("trip-budget-") and len(spec.id) == len("trip-budget-") + 16
    assert (spec.name, spec.description, spec.version) == (
        "trip-budget",
        "Price a team offsite.",
        1,
    )
    assert spec.protocol.quick_start == (
        "Note each cost, total them per person, then write the summary."
    )
    assert spec.order == ("collect", "group", "write")
    assert {s.execution for s in spec.steps.values()} == {"agent"}
    assert spec.step("group").depends_on == ("collect",)
    assert spec.step("collect").input_schema is not None
    assert spec.step("write").structured_output and spec.step("write").llm_timeout_seconds == 60
    assert spec.step("write").exhaustion is not None


def test_the_same_plan_gets_the_same_id_and_another_plan_another() -> None:
    first, _ = plan_workflow(TRIP_BUDGET)
    assert plan_workflow(dict(TRIP_BUDGET))[0].id == first.id
    other = {**TRIP_BUDGET, "metadata": {"name": "trip-budget", "description": "Other."}}
    assert plan_workflow(other)[0].id != first.id
    nameless, _ = plan_workflow({"steps": [{"id": "a", "description": "A"}]})
    assert nameless.id.startswith("dynamic-")


def test_fields_outside_the_plan_are_left_out_and_reported() -> None:
    plan = {
        "workflow_id": "mine",
        "name": "top",
        "services": {},
        "metadata": {"name": "p", "colour": "red"},
        "steps": [
            {
                "id": "a",
                "description": "A",
                "trust": "human_confirmed",
                "gate": {},
                "execution": "auto",
                "timeout_seconds": 3,
            }
        ],
    }
    spec, diagnostics = plan_workflow(plan)
    step = spec.step("a")
    assert (step.execution, step.gate, step.trust) == ("agent", None, "auto")
    assert [(d.code, d.path) for d in diagnostics] == [
        ("unknown_plan_key", "workflow_id"),
        ("unknown_plan_key", "name"),
        ("unknown_plan_key", "services"),
        ("unknown_plan_key", "metadata.colour"),
        ("unknown_step_key", "steps[0].trust"),
        ("unknown_step_key", "steps[0].gate"),
        ("unknown_step_key", "steps[0].execution"),
        ("removed_field", "steps[0].timeout_seconds"),
    ]
    assert "data.workflow_id" in diagnostics[0].message
    assert "it goes under metadata" in diagnostics[1].message


@pytest.mark.parametrize(
    ("plan", "kind", "path", "words"),
    [
        ({"steps": []}, InvalidValue, "steps", "at least one step"),
        ({}, InvalidValue, "steps", "at least one step"),
        (
            {"steps": [{"id": "a", "description": "A"}, {"id": "a", "description": "B"}]},
            InvalidValue,
            "steps[1].id",
            "step id 'a' is used twice",
        ),
        (
            {"steps": [{"id": "a", "description": "A", "depends_on": ["zzz"]}]},
            InvalidValue,
            "steps[0].depends_on",
            "step 'a': depends_on names 'zzz', which is not in the plan",
        ),
        (
            {
                "steps": [
                    {"id": "a", "description": "A", "depends_on": ["b"]},
                    {"id": "b", "description": "B"},
                ]
            },
            InvalidValue,
            "steps[0].depends_on",
            "only steps listed before it",
        ),
        (
            {"steps": [{"id": "a", "description": "A", "input_schema": {"type": "strin"}}]},
            InvalidValue,
            "steps[0].input_schema",
            "not a usable JSON Schema",
        ),
        (
            {"steps": [{"id": "a", "description": "A", "input_schema": {"format": "date"}}]},
            InvalidValue,
            "steps[0].input_schema",
            "`format`",
        ),
        ({"steps": [{"id": "a"}]}, InvalidValue, "steps[0].description", "non-empty"),
        ({"steps": [{"description": "A"}]}, InvalidValue, "steps[0].id", "non-empty"),
        (
            {"steps": [{"id": "run", "description": "A"}]},
            InvalidReference,
            "steps[0].id",
            "reserved",
        ),
        ({"steps": ["a"]}, InvalidValue, "steps[0]", "object"),
        (
            {"steps": [{"id": "a", "description": "A", "llm_timeout_seconds": 0}]},
            InvalidValue,
            "steps[0].llm_timeout_seconds",
            "positive",
        ),
        (
            {"steps": [{"id": "a", "description": "A", "structured_output": "loose"}]},
            InvalidValue,
            "steps[0].structured_output",
            "strict",
        ),
        (
            {"metadata": "x", "steps": [{"id": "a", "description": "A"}]},
            InvalidValue,
            "metadata",
            "object",
        ),
        (
            {"extensions": "./r.mjs", "steps": []},
            UnknownField,
            "extensions",
            "takes no 'extensions'",
        ),
    ],
)
def test_refused_plans(
    plan: dict[str, object], kind: type[RealmSpecError], path: str, words: str
) -> None:
    with pytest.raises(kind) as caught:
        plan_workflow(plan)
    assert caught.value.path == path
    assert words in caught.value.reason
