"""Answer forms generated from a wait's descriptor, and submitted form data turned back into
the answer the wait expects (PURE).

The form only shapes the answer: whether it fits is decided by the one answer path
(`Operations.answer_wait`, `waits.validate_answer`), exactly as for an answer over MCP or the
CLI, so a value that cannot be read as its type is passed on as typed and refused there with
the API's own message. Required fields are marked, never enforced in the browser (`required`
attributes would hide the server's errors, and an approval's inputs are required only to
approve).

Field names in the HTML are prefixed (`f.` answer fields, `b.` push-back feedback fields) so
they never collide with the form's own `decision`, `key` and `csrf` fields.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from tether.runtime import waits

FIELD: Final = "f."
FEEDBACK: Final = "b."
PAYLOAD: Final = "payload"  # a signal's (or agent step's) free JSON payload

_DECISION_LABELS: Final = {
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


def _resolve(schema: Mapping[str, Any], prop: Mapping[str, Any]) -> Mapping[str, Any]:
    """A property with its `$ref` (into the schema's $defs) and Optional `anyOf` unwrapped."""
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        prop = {**(schema.get("$defs") or {}).get(ref.rsplit("/", 1)[1], {}), **prop}
    options = prop.get("anyOf")
    if isinstance(options, list):
        typed = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
        if len(typed) == 1:
            return {**prop, **_resolve(schema, typed[0])}
    return prop


def _choices(prop: Mapping[str, Any]) -> tuple[str, ...]:
    if isinstance(prop.get("enum"), list):
        return tuple(str(v) for v in prop["enum"])
    one_of = prop.get("oneOf")
    if isinstance(one_of, list) and all(isinstance(o, dict) and "const" in o for o in one_of):
        return tuple(str(o["const"]) for o in one_of)
    return ()


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
        prop = _resolve(schema, raw if isinstance(raw, dict) else {})
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
    )


APPROVAL_CHOICES: Final = tuple((d, _DECISION_LABELS[d]) for d in waits.APPROVAL_DECISIONS)


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
    )


# --- reading a submitted form -------------------------------------------------------------


def _number(text: str, widget: str) -> Any:
    """The typed value of a number box; the text itself when it is not one (refused later
    by the answer path, with its own message)."""
    try:
        return int(text) if widget == "integer" else _finite(float(text))
    except ValueError:
        return text


def _finite(value: float) -> float | int:
    if not math.isfinite(value):
        raise ValueError("not finite")
    return int(value) if value.is_integer() and "e" not in repr(value) else value


def _value(field: Field, data: Mapping[str, str]) -> tuple[bool, Any]:
    """(present, value) of one control in the submitted data."""
    if field.widget == "checkbox":
        return True, data.get(field.name) == "true"
    text = data.get(field.name, "")
    if text.strip() == "":
        return False, None
    if field.widget in ("integer", "number"):
        return True, _number(text.strip(), field.widget)
    if field.widget == "json":
        try:
            return True, orjson.loads(text)
        except orjson.JSONDecodeError:
            return True, text
    return True, text


def _collect(fields: tuple[Field, ...], data: Mapping[str, str], prefix: str) -> dict[str, Any]:
    out = {}
    for field in fields:
        present, value = _value(field, data)
        if present:
            out[field.name.removeprefix(prefix)] = value
    return out


def response(form: WaitForm, data: Mapping[str, str]) -> Any:
    """The answer this submitted form gives (`data`: the form's fields, one value each)."""
    if form.payload:
        text = data.get(PAYLOAD, "").strip()
        if not text:
            return None
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            return text
    if not form.decisions:  # a typed signal or agent step
        return _collect(form.fields, data, FIELD)
    decision = data.get("decision", "")
    if decision == "push_back" and form.feedback is not None:
        return {"decision": decision, **_collect(form.feedback, data, FEEDBACK)}
    answer: dict[str, Any] = {"decision": decision}
    if decision != "reject" or form.kind != "approval":
        answer.update(_collect(form.fields, data, FIELD))
    reason = data.get("reason", "").strip()
    if form.reason and reason and decision == "reject":  # a rejection's own argument
        answer["reason"] = reason
    return answer
