"""Order and readiness, against the three documented runs of Realm's refund example."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.specs.realm import (
    ConditionContext,
    Progress,
    Settlement,
    Skip,
    finalizers_for,
    load_file,
    load_string,
    ready_steps,
    upstream_verdict,
)
from tether.specs.realm.model import TriggerRule

REFUND, _ = load_file(Path(__file__).parent / "examples" / "refund.yaml")


def _progress(
    completed: set[str] | frozenset[str],
    failed: set[str] | frozenset[str] = frozenset(),
    skipped: set[str] | frozenset[str] = frozenset(),
    **outputs: object,
) -> Progress:
    return Progress(
        frozenset(completed),
        frozenset(failed),
        frozenset(skipped),
        context=ConditionContext(outputs=outputs),
    )


def test_order_is_topological_with_file_order_ties() -> None:
    assert REFUND.order == (
        "assess",
        "only_low_risk",
        "flag_large",
        "pay",
        "send_receipt",
        "open_ticket",
    )
    assert REFUND.finalizers == ("close_books",)
    assert REFUND.agent_steps == ("assess",)


def test_only_the_first_step_is_ready_at_start() -> None:
    assert ready_steps(REFUND, Progress()).ready == ("assess",)


def test_run_one_low_risk_small_amount() -> None:
    answer = {"risk": "low", "amount": 20}
    after_assess = ready_steps(REFUND, _progress({"assess"}, assess=answer))
    assert after_assess.ready == ("only_low_risk",)
    assert after_assess.skipped == (Skip("flag_large", "when_false", "assess.amount > 50"),)
    done = {"assess", "only_low_risk", "pay"}
    after_pay = ready_steps(REFUND, _progress(done, skipped={"flag_large"}, assess=answer))
    assert after_pay.ready == ("send_receipt",)
    assert after_pay.skipped == (
        Skip("open_ticket", "trigger_rule_unsatisfiable", "one_failed, dep pay completed"),
    )


def test_run_two_a_skip_travels_down_the_graph() -> None:
    state = _progress({"assess"}, skipped={"only_low_risk", "flag_large"})
    readiness = ready_steps(REFUND, state)
    assert readiness.ready == ()
    assert readiness.skipped == (
        Skip("pay", "trigger_rule_unsatisfiable", "all_success, dep only_low_risk skipped"),
        Skip("send_receipt", "trigger_rule_unsatisfiable", "all_success, dep pay skipped"),
        Skip("open_ticket", "trigger_rule_unsatisfiable", "one_failed, dep pay skipped"),
    )


def test_run_three_the_payment_fails() -> None:
    answer = {"risk": "low", "amount": 500}
    state = _progress({"assess", "only_low_risk"}, failed={"pay"}, assess=answer)
    readiness = ready_steps(REFUND, state)
    assert readiness.ready == ("flag_large", "open_ticket")
    assert readiness.skipped == (
        Skip("send_receipt", "trigger_rule_unsatisfiable", "all_success, dep pay failed"),
    )


def test_active_steps_are_neither_ready_nor_skipped() -> None:
    state = Progress(active=frozenset({"assess"}))
    assert ready_steps(REFUND, state).ready == ()


@pytest.mark.parametrize(
    ("rule", "completed", "failed", "skipped", "verdict"),
    [
        ("all_success", {"a", "b"}, set(), set(), "run"),
        ("all_success", {"a"}, set(), set(), "wait"),
        ("all_success", set(), {"a"}, set(), "skip"),
        ("all_success", set(), set(), {"b"}, "skip"),
        ("all_failed", set(), {"a", "b"}, set(), "run"),
        ("all_failed", set(), {"a"}, set(), "wait"),
        ("all_failed", {"a"}, set(), set(), "skip"),
        ("all_failed", set(), {"a"}, {"b"}, "skip"),
        ("all_done", {"a"}, {"b"}, set(), "run"),
        ("all_done", {"a"}, set(), set(), "wait"),
        ("all_done", set(), set(), {"a", "b"}, "run"),
        ("one_failed", set(), {"a"}, set(), "run"),
        ("one_failed", {"a"}, set(), set(), "wait"),
        ("one_failed", {"a", "b"}, set(), set(), "skip"),
        ("one_success", {"a"}, set(), set(), "run"),
        ("one_success", set(), {"a"}, set(), "wait"),
        ("one_success", set(), {"a"}, {"b"}, "skip"),
        ("none_failed", {"a"}, set(), {"b"}, "run"),
        ("none_failed", {"a"}, set(), set(), "wait"),
        ("none_failed", set(), {"a"}, set(), "skip"),
    ],
)
def test_trigger_rules(
    rule: TriggerRule, completed: set[str], failed: set[str], skipped: set[str], verdict: str
) -> None:
    state = _progress(completed, failed, skipped)
    assert upstream_verdict(rule, ("a", "b"), state) == verdict


def test_a_step_without_dependencies_is_ready_under_any_rule() -> None:
    rules: tuple[TriggerRule, ...] = ("all_success", "all_failed", "all_done", "one_failed")
    for rule in (*rules, "one_success"):
        assert upstream_verdict(rule, (), Progress()) == "run"


def test_settlement_routing_under_all_done() -> None:
    text = (
        "id: w\nname: W\nversion: 1\nsteps:\n"
        "  extract:\n    description: E\n    execution: agent\n"
        "  cleanup:\n    description: C\n    execution: auto\n    handler: undo\n"
        "    depends_on: [extract]\n    trigger_rule: all_done\n"
        "    when: '$settlement.extract.failed == true'\n"
    )
    spec, _ = load_string(text)
    failed = Progress(
        failed=frozenset({"extract"}),
        context=ConditionContext(settlements={"extract": Settlement(failed=True)}),
    )
    assert ready_steps(spec, failed).ready == ("cleanup",)
    done = Progress(
        completed=frozenset({"extract"}),
        context=ConditionContext(settlements={"extract": Settlement()}),
    )
    assert ready_steps(spec, done).skipped[0].reason == "when_false"


def test_finalizers_for_each_outcome() -> None:
    text = (
        "id: w\nname: W\nversion: 1\nsteps:\n  a:\n    description: A\n    execution: agent\n"
        "  on_fail:\n    description: F\n    execution: finalizer\n    handler: h\n"
        "    on_outcome: [fail, abort]\n"
        "  always:\n    description: F\n    execution: finalizer\n    handler: h\n"
        "    on_outcome: always\n"
    )
    spec, _ = load_string(text)
    assert spec.order == ("a",)
    assert [s.id for s in finalizers_for(spec, "complete")] == ["always"]
    assert [s.id for s in finalizers_for(spec, "abort")] == ["on_fail", "always"]
    assert ready_steps(spec, _progress({"a"})).ready == ()
