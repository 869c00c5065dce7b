"""The protocol workflow files under `workflows/` (our own, one per feature): those inside the
subset load, the others are refused by the field's name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tether.specs.realm import RealmSpecError, UnknownField, load_file, load_string

WORKFLOWS = Path(__file__).parent / "workflows"
# stem -> the diagnostics its loading reports
INSIDE = {
    "trigger-rules": ["extensions_not_loaded"],
    "gate-message": [],
    "prompt-params": [],
    "gated-agent-step": [],
}
# stem -> (the field refused, its line)
OUTSIDE = {
    "services-block": ("services", 17),
    "webhook-trigger": ("trigger", 7),
}
# stem -> the field an invalid value is refused at
INVALID = {"step-trust-of-a-service": "trust"}


def test_every_workflow_file_is_listed_and_says_what_it_exercises() -> None:
    stems = sorted(p.stem for p in WORKFLOWS.glob("*.yaml"))
    assert stems == sorted([*INSIDE, *OUTSIDE, *INVALID])
    assert sorted(p.name for p in WORKFLOWS.iterdir()) == [f"{s}.yaml" for s in stems]
    for path in WORKFLOWS.glob("*.yaml"):
        first = path.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# Tether's own test data: ")


@pytest.mark.parametrize("stem", sorted(INSIDE))
def test_workflows_inside_the_subset_load(stem: str) -> None:
    spec, diagnostics = load_file(WORKFLOWS / f"{stem}.yaml")
    assert spec.id == stem
    assert [d.code for d in diagnostics] == INSIDE[stem]


@pytest.mark.parametrize("stem", sorted(OUTSIDE))
def test_workflows_outside_the_subset_are_refused_by_name(stem: str) -> None:
    with pytest.raises(UnknownField) as caught:
        load_file(WORKFLOWS / f"{stem}.yaml")
    assert (caught.value.field, caught.value.line) == OUTSIDE[stem]
    assert f"'{OUTSIDE[stem][0]}'" in str(caught.value)


def test_a_service_trust_value_on_a_step_is_refused() -> None:
    with pytest.raises(RealmSpecError) as caught:
        load_file(WORKFLOWS / "step-trust-of-a-service.yaml")
    assert caught.value.field == INVALID["step-trust-of-a-service"]
    assert "engine_delivered" in str(caught.value)


def without_services(text: str) -> str:
    """The workflow with its services replaced by handlers (the subset's way to call code)."""
    text = re.sub(r"\nservices:\n(  .*\n|\n)*", "\n", text)
    text = re.sub(r"    uses_service: \w+\n(    service_method: \w+\n)?", "", text)
    return re.sub(r"    operation: (\w+)", r"    handler: \1", text)


SERVICES = (WORKFLOWS / "services-block.yaml").read_text(encoding="utf-8")


def test_the_services_workflow_loads_once_its_services_are_handlers() -> None:
    spec, diagnostics = load_string(without_services(SERVICES))
    assert diagnostics == []
    assert spec.order == (
        "fetch_invoice",
        "check_invoice",
        "second_look",
        "schedule_payment",
        "raise_dispute",
    )
    look = spec.step("second_look")
    assert (look.execution, look.handler) == ("auto", None)  # a pass-through gate step
    assert look.gate is not None
    assert look.gate.choices == ("pay", "dispute")
    assert look.gate.message is not None and "Invoice {{" in look.gate.message
    assert spec.step("schedule_payment").handler == "schedule_payment"
    assert spec.step("raise_dispute").handler == "open_dispute"
    assert [c.text for c in spec.step("schedule_payment").when] == ["second_look.choice == 'pay'"]
    assert dict(spec.step("fetch_invoice").input_map) == {
        "supplier": "run.params.supplier",
        "invoice_no": "run.params.invoice_no",
    }


def test_a_workflow_registers_under_its_own_id() -> None:
    """An id's characters are left free: `4eyes-invoice-check` (a digit first) and a created
    workflow's `<name>-<hash>` with spaces register under that id, not the workflow-name rule."""
    from tether.runtime.registry import App

    app = App("workflow-files")
    text = without_services(SERVICES)
    assert app.protocol(text).id == "4eyes-invoice-check"
    assert "4eyes-invoice-check" in app.workflows
    spaced = app.create_protocol(text.replace("id: 4eyes-invoice-check", "id: Check it-9f3c"))
    assert app.get(spaced.id).name == "Check it-9f3c"
    with pytest.raises(ValueError, match="invalid workflow name"):

        @app.workflow(name="4eyes-plain")
        async def plain(ctx: object) -> None: ...
