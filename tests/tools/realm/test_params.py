"""Parameter handling: what the MCP layer refuses, and what is ignored (with or without a
warning)."""

from __future__ import annotations

from typing import Any

import pytest

from tether.jsonrpc import codes
from tether.jsonrpc.errors import InvalidParams
from tether.tools.realm import params


@pytest.mark.parametrize(
    ("tool", "args", "problem"),
    [
        ("execute_step", {"run_id": "r"}, "Required at command"),
        (
            "execute_step",
            {"run_id": 3, "command": "a"},
            "Expected string, received number at run_id",
        ),
        ("execute_step", {"run_id": "r", "command": "a", "params": []}, "Expected object"),
        ("get_workflow_protocol", {}, "Required at workflow_id"),
        ("start_run", {"workflow_id": "w", "on_live_match": "x"}, "Invalid enum value"),
        ("start_run", {"workflow_id": "w", "on_terminal_match": "again"}, "Invalid enum value"),
        ("start_run_batch", {"workflow_id": "w"}, "Required at items"),
        ("start_run_batch", {"workflow_id": "w", "items": [{}]}, "Required at items.0.params"),
        ("start_run_batch", {"workflow_id": "w", "items": [3]}, "Expected object"),
        (
            "start_run_batch",
            {"workflow_id": "w", "items": [], "max_items": 1.5},
            "Expected integer",
        ),
        ("submit_human_response", {"run_id": "r", "gate_id": "g"}, "Required at choice"),
        ("advance_run", {}, "Required at run_id"),
        ("get_run_state", {"run_id": "r", "include_steps": "yes"}, "Expected boolean"),
        ("abandon_run", {"run_id": None}, "Expected string, received null at run_id"),
        ("create_workflow", {"steps": [{"id": "a"}]}, "Required at steps.0.description"),
        ("create_workflow", {"steps": []}, "Array must contain at least 1 element(s) at steps"),
        (
            "start_run_batch",
            {"workflow_id": "w", "items": [], "max_items": 0},
            "Number must be greater than 0 at max_items",
        ),
        ("append_trace", {"run_id": "r", "step_id": "s", "entries": [{}]}, "entries.0.event"),
    ],
)
def test_missing_or_wrong_typed_required_is_invalid_params(
    tool: str, args: dict[str, Any], problem: str
) -> None:
    """A missing required parameter or a wrong type is -32602, in the MCP layer's words."""
    with pytest.raises(InvalidParams) as caught:
        params.checked(tool, args)
    assert caught.value.code == codes.INVALID_PARAMS
    assert caught.value.message.startswith(
        f"Input validation error: Invalid arguments for tool {tool}: "
    )
    assert problem in caught.value.message


@pytest.mark.parametrize("tool", sorted(set(params.TOOLS) - params.WARN_UNKNOWN))
def test_unknown_parameters_are_ignored_silently(tool: str) -> None:
    """`idempotencyKey` in place of `idempotency_key` is dropped without a warning."""
    args = {p.name: _valid(p) for p in params.TOOLS[tool] if p.required}
    known, warnings = params.checked(tool, {**args, "idempotencyKey": "k"})
    assert known == args
    assert warnings == []


@pytest.mark.parametrize("tool", sorted(params.WARN_UNKNOWN))
def test_three_tools_name_what_they_ignored(tool: str) -> None:
    """create_workflow, submit_human_response and advance_run name it in warnings."""
    args = {p.name: _valid(p) for p in params.TOOLS[tool] if p.required}
    known, warnings = params.checked(tool, {**args, "extra_thing": 1})
    assert known == args
    assert warnings == [f"{tool} takes no argument 'extra_thing'; it was ignored."]


def test_an_answer_names_the_argument_it_meant() -> None:
    """A misspelt `claimToken` or `token` gets a warning suggesting `claim_token`."""
    args = {"run_id": "r", "gate_id": "g", "choice": "c"}
    _, warnings = params.checked("submit_human_response", {**args, "claimToken": "t", "gateID": 1})
    assert warnings == [
        "submit_human_response takes no argument 'claimToken'; it was ignored. The argument it "
        "takes is 'claim_token'.",
        "submit_human_response takes no argument 'gateID'; it was ignored. The argument it "
        "takes is 'gate_id'.",
    ]


def test_every_tool_has_an_object_input_schema() -> None:
    for tool, ps in params.TOOLS.items():
        schema = params.object_schema(ps)
        assert schema["type"] == "object", tool
        assert set(schema["required"]) <= set(schema["properties"])


def test_create_workflow_takes_steps_and_metadata_only_and_at_least_one_step() -> None:
    """Realm's create_workflow input schema: `steps` (at least one) and `metadata`; a run of
    a created workflow takes no params, so there is no `params` argument."""
    schema = params.object_schema(params.TOOLS["create_workflow"])
    assert sorted(schema["properties"]) == ["metadata", "steps"]
    assert schema["properties"]["steps"]["minItems"] == 1
    batch = params.object_schema(params.TOOLS["start_run_batch"])
    assert batch["properties"]["max_items"] == {"type": "integer", "exclusiveMinimum": 0}


def _valid(p: params.Param) -> Any:
    if p.min_items:
        return [{q.name: _valid(q) for q in p.items if q.required}] * p.min_items
    return {"string": "x", "object": {}, "array": [], "boolean": True}.get(p.type, 1)
