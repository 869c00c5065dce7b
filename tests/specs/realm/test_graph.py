"""Order and readiness, against three runs of our dataset-release workflow (trigger rules,
a `when`, a guard and a finalizer)."""

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

RELEASE, _ = load_file(Path(__file__).parent / "workflows" / "trigger-rules.yaml")


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
    assert RELEASE.order == (
        "review",
        "open_only",
        "mark_large",
        "upload",
        "announce",
        "file_incident",
    )
    assert RELEASE.finalizers == ("unlock",)
    assert RELEASE.agent_steps == ("review",)


def test_only_the_first_step_is_ready_at_start() -> None:
    assert ready_steps(RELEASE, Progress()).ready == ("review",)


def test_an_open_small_dataset_skips_the_size_tag_and_the_incident() -> None:
    answer = {"license": "open", "rows": 200}
    after_review = ready_steps(RELEASE, _progress({"review"}, review=answer))
    assert after_review.ready == ("open_only",)
    assert after_review.skipped == (Skip("mark_large", "when_false", "review.rows > 1000"),)
    done = {"review", "open_only", "upload"}
    after_upload = ready_steps(RELEASE, _progress(done, skipped={"mark_large"}, review=answer))
    assert after_upload.ready == ("announce",)
    assert after_upload.skipped == (
        Skip("file_incident", "trigger_rule_unsatisfiable", "one_failed, dep upload completed"),
    )


def test_a_skipped_guard_skips_everything_below_it() -> None:
    state = _progress({"review"}, skipped={"open_only", "mark_large"})
    readiness = ready_steps(RELEASE, state)
    assert readiness.ready == ()
    assert readiness.skipped == (
        Skip("upload", "trigger_rule_unsatisfiable", "all_success, dep open_only skipped"),
        Skip("announce", "trigger_rule_unsatisfiable", "all_success, dep upload skipped"),
        Skip("file_incident", "trigger_rule_unsatisfiable", "one_failed, dep upload skipped"),
    )


def test_a_failed_upload_readies_the_incident_and_skips_the_announcement() -> None:
    answer = {"license": "open", "rows": 5000}
    state = _progress({"review", "open_only"}, failed={"upload"}, review=answer)
    readiness = ready_steps(RELEASE, state)
    assert readiness.ready == ("mark_large", "file_incident")
    assert readiness.skipped == (
        Skip("announce", "trigger_rule_unsatisfiable", "all_success, dep upload failed"),
    )


def test_active_steps_are_neither_ready_nor_skipped() -> None:
    state = Progress(active=frozenset({"review"}))
    assert ready_steps(RELEASE, state).ready == ()


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
