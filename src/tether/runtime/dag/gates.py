"""The waits a DAG run opens: approval gates, human tasks (flat scalar forms given as data)
and sub-DAG runs. Each hands the raw answer back; the state machine decides what it means."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final

from tether.runtime import answer_rules
from tether.runtime import waits as w
from tether.specs.dag import Form, FormProperty


@dataclass(frozen=True)
class Answer:
    payload: dict[str, Any]
    by: str | None


# Each of a DAG run's gates and tasks is decided on its own (`answer_rules.answer_effect`): a
# push-back resumes the run at once, a rejection ends it in the answer's own write, whatever
# surface answers (Dagu's decisions), while the run's other gates and tasks keep waiting.
_DECIDED_ALONE: Final[dict[str, Any]] = {answer_rules.WAKES_RUN: ["push_back"]}


def _attempt(attempt: str | None) -> dict[str, Any]:
    """The DAG run's attempt the wait opened under (Dagu's attemptId), kept in the wait's
    descriptor so a decision checks it against the very wait it answers."""
    return {} if attempt is None else {"attempt": attempt}


@dataclass(frozen=True)
class Gate(w.Approval):
    """An approval gate whose answer (approve / reject / push_back) comes back raw."""

    keeps_keys: ClassVar[bool] = True  # open while the run goes on after a push-back
    # Any input name Dagu allows (`reason`, `decision` too): the run reads its answers with
    # `answer_fields` (state.py), not with `Approval.parse`.
    _reserved: ClassVar[frozenset[str]] = frozenset()
    attempt: str | None = None

    def extra(self) -> dict[str, Any]:
        ends = {answer_rules.ENDS_RUN: ["reject"]}
        return {**super().extra(), **_attempt(self.attempt), **_DECIDED_ALONE, **ends}

    def parse(self, response: Any, by: str | None) -> Answer:  # type: ignore[override]  # raw
        return Answer(dict(response), by)


@dataclass(frozen=True)
class FormTask(w.WaitSpec):
    """A human task over a flat scalar form (JSON data, checked by `scalar_forms`)."""

    kind: ClassVar[str] = "human_task"
    keeps_keys: ClassVar[bool] = True
    form: dict[str, Any] | None = None
    feedback: dict[str, Any] | None = None
    attempt: str | None = None

    def answer_schema(self) -> dict[str, Any]:
        return answer_rules.human_task_schema(self.form or {})

    def extra(self) -> dict[str, Any]:
        extra = {"form": self.form, "feedback": self.feedback, "rules": "scalar", **_DECIDED_ALONE}
        return {**extra, **_attempt(self.attempt)}

    def parse(self, response: Any, by: str | None) -> Answer:
        return Answer(dict(response), by)


@dataclass(frozen=True)
class ChildRun(w.WaitSpec):
    """The end of a child run (`name` is its execution id); answered by the database when
    the child ends (migration 0005), never from outside."""

    kind: ClassVar[str] = "child"

    def parse(self, response: Any, by: str | None) -> Answer:
        return Answer(dict(response), by)


def form_schema(form: Form | None, *, feedback: bool = False) -> dict[str, Any]:
    """A form as the flat JSON schema every surface shows (and `scalar_forms` checks)."""
    if form is None:
        return {"type": "object", "properties": {}, "additionalProperties": False}
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {p.name: _property(p) for p in form.properties},
        "additionalProperties": False if feedback else form.additional_properties,
    }
    if form.required:
        schema["required"] = list(form.required)
    if form.title:
        schema["title"] = form.title
    if form.description:
        schema["description"] = form.description
    return schema


def _property(p: FormProperty) -> dict[str, Any]:
    out: dict[str, Any] = {"type": p.type}
    optional = {
        "title": p.title,
        "description": p.description,
        "default": p.default,
        "minimum": p.minimum,
        "maximum": p.maximum,
        "minLength": p.min_length,
        "maxLength": p.max_length,
        "pattern": p.pattern,
    }
    out.update({k: v for k, v in optional.items() if v is not None})
    if p.enum:
        out["enum"] = list(p.enum)
    if p.one_of:
        out["oneOf"] = [{"const": c} for c in p.one_of]
    return out
