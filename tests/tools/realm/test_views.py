"""get_workflow_protocol's briefing: the rules, the opening instruction, each step's part."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tether.runtime.realm.plan import plan_from_text
from tether.tools.realm.views import ADDED_RULES, DEFAULT_RULES, ERROR_HANDLING, protocol_view

WORKFLOWS = Path(__file__).parents[2] / "specs" / "realm" / "workflows"


def _view(stem: str) -> dict[str, Any]:
    return protocol_view(plan_from_text((WORKFLOWS / f"{stem}.yaml").read_text(encoding="utf-8")))


def test_the_default_briefing_has_seven_rules_and_the_opening_instruction() -> None:
    view = _view("gate-message")
    assert view["rules"] == [*DEFAULT_RULES, *ADDED_RULES]
    assert len(view["rules"]) == 7
    assert view["quick_start"].startswith("Begin with start_run, workflow_id 'gate-message'.")
    assert view["agent_steps_summary"] == "1 of 3 steps is for the agent; the engine runs 2 itself."
    compose, sign_off, post = view["steps"]
    assert compose["agent_involvement"].endswith("the engine runs 'sign_off' before it replies.")
    assert sign_off["possible_gate"] == {"choices": ["put_up", "hold_back"]}
    assert "confirm_required" in sign_off["agent_involvement"]
    assert "possible_gate" not in post
    assert set(view["error_handling"]) == {
        "provide_input", "report_to_user", "resolve_precondition", "stop",
        "wait_for_human", "wait_and_proceed",
    }  # fmt: skip
    assert view["error_handling"] == ERROR_HANDLING


def test_a_protocol_of_its_own_keeps_its_rules_and_lists_guards_and_finalizers() -> None:
    text = (
        (WORKFLOWS / "trigger-rules.yaml")
        .read_text(encoding="utf-8")
        .replace(
            "steps:\n",
            "protocol:\n  quick_start: Start with the card.\n  rules: [Be brief.]\nsteps:\n",
            1,
        )
    )
    own = protocol_view(plan_from_text(text))
    assert (own["quick_start"], own["rules"]) == (
        "Start with the card.",
        ["Be brief.", *ADDED_RULES],
    )
    view = _view("trigger-rules")
    kinds = {s["id"]: s["execution"] for s in view["steps"]}
    assert kinds["open_only"] == "guard"
    assert kinds["unlock"] == "finalizer"  # finalizers are steps of the briefing too
    guard = next(s for s in view["steps"] if s["id"] == "open_only")
    assert "Never name it in execute_step" in guard["agent_involvement"]
    assert "params_schema" not in view
