"""get_workflow_protocol's briefing in Realm's words (protocol/generator.ts, tools.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tether.runtime.realm.plan import plan_from_text
from tether.tools.realm.views import ADDED_RULES, DEFAULT_RULES, protocol_view

EXAMPLES = Path(__file__).parents[2] / "specs" / "realm" / "examples"


def _view(stem: str) -> dict[str, Any]:
    return protocol_view(plan_from_text((EXAMPLES / f"{stem}.yaml").read_text(encoding="utf-8")))


def test_the_default_briefing_has_seven_rules_and_the_opening_instruction() -> None:
    view = _view("announce")
    assert view["rules"] == [*DEFAULT_RULES, *ADDED_RULES]
    assert len(view["rules"]) == 7
    assert view["quick_start"].startswith(
        "Call start_run with workflow_id 'announce'. The engine runs the steps it owns"
    )
    assert view["agent_steps_summary"] == (
        "1 of 3 steps requires agent action. 2 are run by the engine."
    )
    draft, review, send = view["steps"]
    assert draft["agent_involvement"].endswith(
        "the engine runs 'review' automatically before returning."
    )
    assert review["possible_gate"] == {"choices": ["send", "discard"]}
    assert "confirm_required" in review["agent_involvement"]
    assert "possible_gate" not in send
    assert set(view["error_handling"]) == {
        "provide_input", "report_to_user", "resolve_precondition", "stop",
        "wait_for_human", "wait_and_proceed",
    }  # fmt: skip


def test_a_protocol_of_its_own_keeps_its_rules_and_lists_guards_and_finalizers() -> None:
    text = (
        (EXAMPLES / "refund.yaml")
        .read_text(encoding="utf-8")
        .replace(
            "steps:\n",
            "protocol:\n  quick_start: Start with the order.\n  rules: [Be brief.]\nsteps:\n",
            1,
        )
    )
    own = protocol_view(plan_from_text(text))
    assert (own["quick_start"], own["rules"]) == (
        "Start with the order.",
        ["Be brief.", *ADDED_RULES],
    )
    view = _view("refund")
    kinds = {s["id"]: s["execution"] for s in view["steps"]}
    assert kinds["only_low_risk"] == "guard"
    assert kinds["close_books"] == "finalizer"  # finalizers are steps of the briefing too
    guard = next(s for s in view["steps"] if s["id"] == "only_low_risk")
    assert "do NOT call execute_step" in guard["agent_involvement"]
    assert "params_schema" not in view
