"""Realm's public example workflows: those inside the subset load, the others are refused by name.

Each file in `examples/` is vendored unchanged under a first line naming its source path and
commit in sensigo-hq/realm (Apache-2.0: `examples/NOTICE` and the licence beside it).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tether.specs.realm import RealmSpecError, UnknownField, load_file, load_string

EXAMPLES = Path(__file__).parent / "examples"
# stem -> the diagnostics its loading reports
INSIDE = {"refund": ["extensions_not_loaded"], "announce": [], "article": []}
# stem -> (the field refused, its line)
OUTSIDE = {
    "01-code-reviewer": ("services", 23),
    "07-issue-triage": ("services", 25),
    "08-pr-review": ("services", 29),
    "09-webhook-pr-review": ("trigger", 21),
    "multi-step-workflow": ("services", 25),
}


def test_every_example_is_listed_and_names_its_source() -> None:
    stems = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))
    assert stems == sorted([*INSIDE, *OUTSIDE])
    for path in EXAMPLES.glob("*.yaml"):
        first = path.read_text(encoding="utf-8").splitlines()[0]
        assert re.fullmatch(r"# vendored from sensigo-hq/realm \S+ @ [0-9a-f]{40}.*", first)
    notice = (EXAMPLES / "NOTICE").read_text(encoding="utf-8")  # Apache-2.0 §4: the licence
    assert "Apache License, Version 2.0" in notice and "Sensigo Software" in notice
    assert "Apache License\n" in (EXAMPLES / "LICENSE-Apache-2.0").read_text(encoding="utf-8")


@pytest.mark.parametrize("stem", sorted(INSIDE))
def test_examples_inside_the_subset_load(stem: str) -> None:
    spec, diagnostics = load_file(EXAMPLES / f"{stem}.yaml")
    assert spec.id == stem
    assert [d.code for d in diagnostics] == INSIDE[stem]


@pytest.mark.parametrize("stem", sorted(OUTSIDE))
def test_examples_outside_the_subset_are_refused_by_name(stem: str) -> None:
    with pytest.raises(UnknownField) as caught:
        load_file(EXAMPLES / f"{stem}.yaml")
    assert (caught.value.field, caught.value.line) == OUTSIDE[stem]
    assert f"'{OUTSIDE[stem][0]}'" in str(caught.value)


def without_services(text: str) -> str:
    """The example with its services replaced by handlers (the subset's way to call code)."""
    text = re.sub(r"\nservices:\n(  .*\n|\n)*", "\n", text)
    text = re.sub(r"    uses_service: \w+\n(    service_method: \w+\n)?", "", text)
    return re.sub(r"    operation: (\w+)", r"    handler: \1", text)


def test_pr_review_loads_once_its_services_are_handlers() -> None:
    text = without_services((EXAMPLES / "08-pr-review.yaml").read_text(encoding="utf-8"))
    spec, diagnostics = load_string(text)
    assert diagnostics == []
    assert spec.order == (
        "fetch_pr",
        "write_review",
        "confirm_review",
        "post_approval",
        "post_changes_request",
    )
    confirm = spec.step("confirm_review")
    assert (confirm.execution, confirm.handler) == ("auto", None)  # a pass-through gate step
    assert confirm.gate is not None
    assert confirm.gate.choices == ("approve", "request_changes")
    assert confirm.gate.message is not None and "PR #" in confirm.gate.message
    assert spec.step("post_approval").handler == "post_comment"
    assert [c.text for c in spec.step("post_approval").when] == [
        "confirm_review.choice == 'approve'"
    ]
    assert dict(spec.step("fetch_pr").input_map) == {
        "repo": "run.params.repo",
        "pr_number": "run.params.pr_number",
    }


def test_code_reviewer_is_refused_for_its_step_trust_once_services_are_gone() -> None:
    text = without_services((EXAMPLES / "01-code-reviewer.yaml").read_text(encoding="utf-8"))
    with pytest.raises(RealmSpecError) as caught:
        load_string(text)
    assert caught.value.field == "trust"  # `engine_delivered` is a service's trust, not a step's


def test_pr_review_registers_under_its_own_id() -> None:
    """Realm leaves an id's characters free: `08-pr-review` (a digit first) and a created
    workflow's `<name>-<hash>` with spaces register under that id, not the workflow-name rule."""
    from tether.runtime.registry import App

    app = App("examples")
    text = without_services((EXAMPLES / "08-pr-review.yaml").read_text(encoding="utf-8"))
    assert app.protocol(text).id == "08-pr-review"
    assert "08-pr-review" in app.workflows
    spaced = app.create_protocol(text.replace("id: 08-pr-review", "id: Review the PR-0a1b"))
    assert app.get(spaced.id).name == "Review the PR-0a1b"
    with pytest.raises(ValueError, match="invalid workflow name"):

        @app.workflow(name="08-plain")
        async def plain(ctx: object) -> None: ...
