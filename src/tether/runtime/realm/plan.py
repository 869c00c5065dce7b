"""What the interpreter runs of a protocol: the workflow loaded by `tether.specs.realm` (the
one YAML loader, the one condition evaluator), seen as steps in dependency order.

`plan_from_text` loads the text with `load_string` and refuses, by name, what this
interpreter does not run yet (`preconditions`), so a protocol either runs as written or is
refused when it is registered. Finalizers are `spec.finalizers` (not in `steps`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tether.specs.errors import INLINE
from tether.specs.realm import (
    Condition,
    Diagnostic,
    Gate,
    RealmSpecError,
    Step,
    WorkflowSpec,
    load_string,
)


class PlanError(ValueError):
    """The protocol cannot be loaded or interpreted; its text names the step and field.

    Raised by [`App.protocol`][tether.App.protocol]. A `ValueError`, as the other refusals
    of a bad definition are.
    """


@dataclass(frozen=True)
class PlanStep:
    """One step as the interpreter and the tools read it (`spec` is the loaded step)."""

    spec: Step

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def kind(self) -> str:
        return self.spec.execution

    @property
    def description(self) -> str:
        return self.spec.description

    @property
    def depends_on(self) -> tuple[str, ...]:
        return self.spec.depends_on

    @property
    def prompt(self) -> str | None:
        return self.spec.prompt

    @property
    def instructions(self) -> str | None:
        return self.spec.instructions

    @property
    def handler(self) -> str | None:
        return self.spec.handler

    @property
    def config(self) -> Mapping[str, Any]:
        return self.spec.config

    @property
    def when(self) -> tuple[Condition, ...]:
        return self.spec.when

    @property
    def abort_unless(self) -> tuple[Condition, ...]:
        return self.spec.abort_unless

    @property
    def abort_message(self) -> str | None:
        return self.spec.abort_message

    @property
    def gate(self) -> Gate | None:
        return self.spec.gate

    @property
    def input_schema(self) -> Mapping[str, Any] | None:
        s = self.spec.input_schema
        return s.document if s is not None and isinstance(s.document, Mapping) else None

    @property
    def output_schema(self) -> Mapping[str, Any] | None:
        s = self.spec.output_schema
        return s.document if s is not None and isinstance(s.document, Mapping) else None

    @property
    def answer_schema(self) -> dict[str, Any]:
        """The schema an agent's answer must fit: both of input_schema and output_schema
        when the step has both, else the one it has, else any object. A gated agent step's
        answer is checked against its input_schema too."""
        given = [dict(s) for s in (self.input_schema, self.output_schema) if s is not None]
        if len(given) == 2:
            return {"allOf": given}
        return given[0] if given else {"type": "object"}


@dataclass(frozen=True)
class Plan:
    """A loaded protocol: `steps` in the spec's topological order."""

    spec: WorkflowSpec
    steps: tuple[PlanStep, ...]
    diagnostics: tuple[Diagnostic, ...] = ()

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def version(self) -> int | float:
        return self.spec.version

    @property
    def description(self) -> str | None:
        return self.spec.description

    @property
    def params_schema(self) -> Mapping[str, Any] | None:
        s = self.spec.params_schema
        return s.document if s is not None and isinstance(s.document, Mapping) else None

    @property
    def quick_start(self) -> str | None:
        return self.spec.protocol.quick_start

    @property
    def rules(self) -> tuple[str, ...]:
        return self.spec.protocol.rules or ()

    def step(self, step_id: str) -> PlanStep | None:
        return next((s for s in self.steps if s.id == step_id), None)


def _unsupported(step: Step) -> str | None:
    if step.preconditions:
        return "preconditions: not run by Tether yet"
    return None


def plan_from_spec(spec: WorkflowSpec, diagnostics: tuple[Diagnostic, ...] = ()) -> Plan:
    """The interpretable plan of a loaded workflow. Raises PlanError (an unsupported field)."""
    for step in spec.steps.values():
        why = _unsupported(step)
        if why is not None:
            raise PlanError(f"steps.{step.id}.{why}")
    steps = tuple(PlanStep(spec.steps[sid]) for sid in spec.order)
    return Plan(spec, steps, diagnostics)


def plan_from_text(text: str, *, file: str = INLINE) -> Plan:
    """Load `text` (Realm's workflow YAML) and plan it. Raises PlanError (the loader's
    refusal, with its field and line, or an unsupported field)."""
    try:
        spec, diagnostics = load_string(text, file=file)
    except RealmSpecError as exc:
        raise PlanError(str(exc)) from exc
    return plan_from_spec(spec, tuple(diagnostics))
