"""The reply envelope's presence rules, statuses and actions."""

from __future__ import annotations

from typing import Any

import pytest

from tether.tools.realm import envelope
from tether.tools.realm.envelope import Reply, action_for, refusal

ALWAYS = {
    "command",
    "run_id",
    "run_version",
    "status",
    "context_hint",
    "next_actions",
    "warnings",
    "errors",
    "data",
    "evidence",
}

GATE = {"gate_id": "g1", "step_name": "approve", "preview": {}, "choices": ["approve", "reject"]}
BLOCKED = {"eligible_steps": [], "suggestion": "No other step can be called now."}


@pytest.mark.parametrize(
    ("status", "extra"),
    [
        ("ok", {}),
        ("ok", {"agent_action": "stop"}),
        ("error", {"agent_action": "provide_input", "error_code": "VALIDATION_OUTPUT_SCHEMA"}),
        ("error", {"agent_action": "wait_and_proceed", "retry_after": 3}),
        ("blocked", {"agent_action": "resolve_precondition", "blocked_reason": BLOCKED}),
        ("confirm_required", {"gate": GATE}),
    ],
)
def test_each_status_writes_the_fields_always_present(status: Any, extra: dict[str, Any]) -> None:
    """Every reply of the shared shape carries the ten fields always present."""
    wire = Reply("s", "r1", status, "hint", run_version=3, extra=extra).to_wire()
    assert set(wire) >= ALWAYS
    assert set(wire) - ALWAYS == set(extra)
    assert wire["run_version"] == 3


@pytest.mark.parametrize(
    ("status", "extra"),
    [
        ("error", {}),  # an error needs its action
        ("blocked", {"agent_action": "resolve_precondition"}),  # blocked needs blocked_reason
        ("blocked", {"blocked_reason": BLOCKED}),
        ("ok", {"agent_action": "report_to_user"}),  # ok carries only stop
        ("confirm_required", {"gate": GATE, "agent_action": "stop"}),
        ("confirm_required", {}),  # without its gate
        ("ok", {"gate": GATE}),
        ("error", {"agent_action": "stop", "retry_after": 2}),
        ("error", {"agent_action": "wait_and_proceed"}),
        ("ok", {"error_code": "STATE_BLOCKED"}),
        ("ok", {"answer_recorded": True}),
        ("ok", {"not_a_field": 1}),
        ("done", {}),
        ("error", {"agent_action": "retry"}),
    ],
)
def test_combinations_the_presence_rules_forbid_are_refused(
    status: Any, extra: dict[str, Any]
) -> None:
    """A reply the presence rules forbid cannot be built."""
    with pytest.raises(ValueError):
        Reply("s", "r1", status, "hint", extra=extra)


def test_run_version_is_left_out_only_by_get_run_state_and_abandon_run() -> None:
    """Only get_run_state and abandon_run, when they refuse, leave run_version out."""
    for command in ("get_run_state", "abandon_run"):
        wire = refusal(command, "x", "STATE_RUN_NOT_FOUND", "no run", run_version=None).to_wire()
        assert "run_version" not in wire
    with pytest.raises(ValueError):
        refusal("execute_step", "x", "STATE_RUN_NOT_FOUND", "no run", run_version=None)


def test_empty_optional_fields_are_left_out() -> None:
    """A field that does not apply is absent, not null."""
    wire = Reply("start_run", "r", "ok", "h", extra={"deduped": None, "run_phase": "running"})
    assert "deduped" not in wire.to_wire()
    assert wire.to_wire()["run_phase"] == "running"


@pytest.mark.parametrize(
    ("code", "action"),
    [
        ("STATE_RUN_NOT_FOUND", "report_to_user"),
        ("STATE_WORKFLOW_NOT_FOUND", "report_to_user"),
        ("STATE_RUN_TERMINAL", "report_to_user"),
        ("STATE_TRANSITION_DENIED", "report_to_user"),
        ("STATE_RUN_ALREADY_ACTIVE", "report_to_user"),
        ("STATE_IDEMPOTENCY_KEY_USED", "report_to_user"),
        ("STEP_NOT_FOUND", "report_to_user"),
        ("VALIDATION_ACTOR_INVALID", "report_to_user"),
        ("VALIDATION_OUTPUT_SCHEMA", "provide_input"),
        ("VALIDATION_INPUT_SCHEMA", "provide_input"),
        ("VALIDATION_EMPTY_VALUE", "provide_input"),
        ("VALIDATION_BATCH_TOO_LARGE", "provide_input"),
        ("VALIDATION_BATCH_ITEMS", "provide_input"),
        ("BUFFER_FULL", "provide_input"),
        ("STATE_BLOCKED", "resolve_precondition"),
        ("STATE_STEP_NOT_ELIGIBLE", "resolve_precondition"),
        ("VALIDATION_EXHAUSTED", "stop"),
        ("ENGINE_STORE_FAILED", "stop"),
        ("ENGINE_HANDLER_NOT_REGISTERED", "stop"),
        ("SERVICE_RATE_LIMITED", "wait_and_proceed"),
    ],
)
def test_each_code_has_its_documented_action(code: str, action: str) -> None:
    """Each error code's default agent_action."""
    assert action_for(code) == action


def test_reply_overrides() -> None:
    """Realm's override rules: before the run is read P and R become U; a failed step that
    ends the run gives S; a failed step on an open run turns S, P and R into U; a schema
    refusal keeps P."""
    assert action_for("STATE_BLOCKED", run_read=False) == "report_to_user"
    assert action_for("VALIDATION_EMPTY_VALUE", run_read=False) == "report_to_user"
    assert action_for("STEP_TIMEOUT", step_failed=True, run_ended=True) == "stop"
    assert action_for("ENGINE_STEP_FAILED", step_failed=True) == "report_to_user"
    assert action_for("VALIDATION_OUTPUT_SCHEMA", step_failed=True) == "provide_input"


def test_next_actions_put_advance_run_last() -> None:
    """An advance_run entry comes last."""
    entries = [
        envelope.advance_action("r", ["score"]),
        envelope.step_action("r", "draft", description="D", input_schema=None, prompt="W"),
        envelope.gate_action("r", "g", "approve", ["approve", "reject"]),
    ]
    wire = Reply("start_run", "r", "ok", "h", next_actions=entries).to_wire()
    tools = [a["instruction"]["tool"] for a in wire["next_actions"]]
    assert tools == ["execute_step", "submit_human_response", "advance_run"]
    assert wire["evidence"] == []  # a list, always empty in these replies


SCHEMA = {
    "type": "object",
    "required": ["severity", "score", "tags", "ok"],
    "properties": {
        "severity": {"type": "string", "enum": ["minor", "major", "blocker"]},
        "score": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ok": {"type": "boolean"},
        "note": {"type": "string"},
    },
}


def test_a_step_entry_carries_a_skeleton_of_its_input_schema() -> None:
    """call_with's params are a skeleton of the step's input_schema (required properties,
    `<a|b>` for an enum); input_schema and prompt only when the step declares them."""
    entry = envelope.step_action(
        "r", "classify", description="Classify it.", input_schema=SCHEMA, prompt=None
    )
    assert entry == {
        "instruction": {
            "tool": "execute_step",
            "params": {"run_id": "r", "command": "classify"},
            "call_with": {
                "run_id": "r",
                "command": "classify",
                "params": {
                    "severity": "<minor|major|blocker>",
                    "score": 0,
                    "tags": [""],
                    "ok": False,
                },
            },
        },
        "input_schema": SCHEMA,
        "human_readable": "Do step 'classify' with execute_step: Classify it.",
        "orientation": "The run is open; step 'classify' is ready for you.",
    }
    bare = envelope.step_action("r", "draft", description="D", input_schema=None, prompt="p")
    assert bare["instruction"]["call_with"]["params"] == {}
    assert "input_schema" not in bare and bare["prompt"] == "p"


def test_the_answer_and_advance_entries_name_their_choices_and_steps() -> None:
    """The answer entry: `<a|b>`, the claim token only when given; the advance entry: the
    steps it runs."""
    token = "t"  # noqa: S105 — a test claim token
    opening = envelope.gate_action(
        "r", "g1", "ship", ["yes", "no"], claim_token=token, gate_reply=True
    )
    assert opening["instruction"]["params"] == {"run_id": "r", "gate_id": "g1", "claim_token": "t"}
    assert opening["instruction"]["call_with"]["choice"] == "<yes|no>"
    assert opening["orientation"] == "Gate 'g1' waits for a person to pick one of: yes, no."
    assert opening["human_readable"].endswith(
        "sending call_with unchanged: the claim_token in it ties the answer to the reply that "
        "opened this gate."
    )
    other = envelope.gate_action("r", "g1", "ship", ["yes", "no"])
    assert other["human_readable"].startswith(
        "A person decides step 'ship': ask them to pick one of yes, no and send it with "
    )
    assert "claim_token" not in other["instruction"]["call_with"]
    owed = envelope.advance_action("r", ["check", "score"])
    assert owed["human_readable"] == (
        "Call advance_run: the engine runs 'check', 'score' with this server's handlers, and "
        "keeps going until a step waits for an answer or fails, or the run ends."
    )
    assert owed["orientation"] == (
        "The run is open and the engine has work to do: 'check', 'score'."
    )


def test_refusal_takes_its_codes_action_and_names_the_error() -> None:
    wire = refusal("start_run", "", "STATE_WORKFLOW_NOT_FOUND", "no workflow 'x'").to_wire()
    assert wire["status"] == "error"
    assert wire["agent_action"] == "report_to_user"
    assert wire["errors"] == ["no workflow 'x'"]
    assert wire["run_id"] == ""
    assert wire["run_version"] == 0
