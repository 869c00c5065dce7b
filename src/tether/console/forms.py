"""Answer forms generated from a wait's descriptor, and submitted form data turned back into
the answer the wait expects (PURE).

The form only shapes the answer: what each box's text is as a value is read by the runtime's
one reader (`answers.read`: a number box's text that is not a number is refused naming its
field, as it is from the CLI), and whether the answer fits is decided by the one answer path
(`Operations.answer_wait`, `answer_rules.validate_answer`), exactly as for an answer over MCP or
the CLI. Required fields are marked, never enforced in the browser (`required` attributes would
hide the server's errors, and an approval's inputs are required only to approve).

Field names in the HTML are prefixed (`f.` answer fields, `b.` push-back feedback fields) so
they never collide with the form's own `decision`, `key` and `csrf` fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from tether.runtime import answer_rules, answers, votes

FIELD: Final = "f."
FEEDBACK: Final = "b."
PAYLOAD: Final = "payload"  # a signal's (or agent step's) free JSON payload

DECISION_LABELS: Final = {
    "approve": "Approve",
    "reject": "Reject",
    "push_back": "Push back",
    "complete": "Complete",
}


@dataclass(frozen=True)
class Field:
    """One control: `widget` is text, textarea, integer, number, checkbox, select or json."""

    name: str
    label: str
    widget: str
    required: bool = False
    options: tuple[str, ...] = ()
    default: str | None = None
    description: str | None = None
    checked: bool = False


@dataclass(frozen=True)
class WaitForm:
    key: str
    kind: str
    name: str
    prompt: str | None
    decisions: tuple[tuple[str, str], ...]  # (value, button label); () for a signal: "Send"
    fields: tuple[Field, ...]
    feedback: tuple[Field, ...] | None  # push-back fields (None: no push back)
    reason: bool  # a reason box (approvals: for reject)
    payload: bool  # a free JSON payload box (signal / agent step without typed fields)
    wait: Mapping[str, Any] = field(default_factory=dict)  # the descriptor it was made from

    @property
    def votes(self) -> str | None:
        """The votes cast on it so far, in words (None: its first answer decides it)."""
        return votes.summary(self.wait)


def _choices(prop: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(v) for v in answers.choices(prop))


def _widget(prop: Mapping[str, Any]) -> str:
    if _choices(prop):
        return "select"
    kind = prop.get("type")
    if kind == "string":
        return "textarea" if prop.get("format") == "textarea" else "text"
    if kind in ("integer", "number", "boolean"):
        return "checkbox" if kind == "boolean" else str(kind)
    return "json"


def _default(prop: Mapping[str, Any]) -> str | None:
    if "default" not in prop or prop["default"] is None:
        return None
    value = prop["default"]
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode() if not isinstance(value, bool) else str(value).lower()


def schema_fields(schema: Mapping[str, Any] | None, prefix: str = FIELD) -> tuple[Field, ...]:
    """A control per property of an object schema (empty when it has no properties)."""
    if not schema:
        return ()
    required = set(schema.get("required") or [])
    out = []
    for name, raw in (schema.get("properties") or {}).items():
        if name == "decision":
            continue
        prop = answers.resolve_property(schema, raw if isinstance(raw, dict) else {})
        out.append(
            Field(
                name=prefix + name,
                label=str(prop.get("title") or name),
                widget=_widget(prop),
                required=name in required and "default" not in prop,
                options=_choices(prop),
                default=_default(prop),
                description=prop.get("description"),
                checked=prop.get("default") is True,
            )
        )
    return tuple(out)


def _approval(wait: Mapping[str, Any]) -> WaitForm:
    choices = wait.get("choices")
    decisions = tuple(APPROVAL_CHOICES if not choices else ((c, str(c)) for c in choices))
    required = set(wait.get("required") or [])
    fields = tuple(
        Field(FIELD + name, name, "text", required=name in required)
        for name in ([] if choices else wait.get("inputs") or [])
    )
    return WaitForm(
        wait["key"],
        "approval",
        wait["name"],
        wait.get("prompt"),
        decisions,
        fields,
        None,
        reason=not choices,
        payload=False,
        wait=wait,
    )


APPROVAL_CHOICES: Final = tuple((d, DECISION_LABELS[d]) for d in answer_rules.APPROVAL_DECISIONS)


def _human_task(wait: Mapping[str, Any]) -> WaitForm:
    feedback_schema = wait.get("feedback")
    scalar = wait.get("rules") == "scalar"
    feedback: tuple[Field, ...] | None
    if scalar and feedback_schema is None:
        feedback = None  # a DAG task without push_back
    else:
        feedback = schema_fields(feedback_schema, FEEDBACK) or (
            Field(FEEDBACK + "comment", "comment", "textarea"),
        )
    decisions: tuple[tuple[str, str], ...] = (("complete", "Complete"),)
    if feedback is not None:
        decisions += (("push_back", "Push back"),)
    return WaitForm(
        wait["key"],
        "human_task",
        wait["name"],
        wait.get("prompt"),
        decisions,
        schema_fields(wait.get("form")),
        feedback,
        reason=False,
        payload=False,
        wait=wait,
    )


def wait_form(wait: Mapping[str, Any]) -> WaitForm:
    """The form of one open wait (its descriptor, as the run row holds it)."""
    kind = wait.get("kind")
    if kind == "approval":
        return _approval(wait)
    if kind == "human_task":
        return _human_task(wait)
    fields = schema_fields(wait.get("schema"))
    return WaitForm(
        wait["key"],
        str(kind),
        wait["name"],
        wait.get("prompt"),
        (),
        fields,
        None,
        reason=False,
        payload=not fields,
        wait=wait,
    )


# --- reading a submitted form -------------------------------------------------------------


def _texts(fields: tuple[Field, ...], data: Mapping[str, str], prefix: str) -> dict[str, str]:
    """What the person typed in each control, by field name: a box left empty sends nothing,
    a checkbox `true` or `false` (an unchecked box is not in the data)."""
    out: dict[str, str] = {}
    for control in fields:
        name = control.name.removeprefix(prefix)
        if control.widget == "checkbox":
            out[name] = "true" if data.get(control.name) == "true" else "false"
        elif data.get(control.name, "").strip():
            out[name] = data[control.name]
    return out


def response(form: WaitForm, data: Mapping[str, str]) -> Any:
    """The answer this submitted form gives (`data`: the form's fields, one value each).

    Raises AnswerRejected: a box's text that cannot be read as its field's type."""
    if form.payload:
        text = data.get(PAYLOAD, "").strip()
        given: answers.Given = answers.Text(text, PAYLOAD) if text else answers.Value(None)
        return answers.read(given, form.wait)
    if not form.decisions:  # a typed signal or agent step
        return answers.read(answers.Form(texts=_texts(form.fields, data, FIELD)), form.wait)
    decision = data.get("decision", "")
    if decision == "push_back" and form.feedback is not None:
        feedback = _texts(form.feedback, data, FEEDBACK)
        return answers.read(answers.Form(decision, texts=feedback), form.wait)
    rejected = decision == "reject" and form.kind == "approval"
    texts = {} if rejected else _texts(form.fields, data, FIELD)
    reason = data.get("reason", "").strip()
    own = reason if form.reason and reason and rejected else None  # a rejection's argument
    return answers.read(answers.Form(decision, texts=texts, reason=own), form.wait)
