"""Answers as people and agents give them, read into the value a wait takes. Pure.

A surface gets an answer in one of three shapes; `read` turns each into the value the one
answer path (`Operations.answer`) then checks against the wait (`answer_rules.validate_answer`):

- `Value`, an answer that arrived as JSON (`answer_<wf>`, the fields of a `tasks/update`
  form), is taken as it is: JSON keeps its types (`"3"` stays a string, and a wrong type is
  refused by the answer path).
- `Text`, a whole answer typed as text (`tether runs answer`, the `payload` field of a
  `tasks/update` fallback form, the console's payload box), is JSON text.
- `Form`, a decision and its inputs (`dagu_execute` approve / reject / push_back, Realm's
  `submit_human_response`, `tether runs approve|reject|push-back|complete`, the console's
  forms), is the decision's answer (`answer_rules.decision_answer`) over its inputs, each
  input typed as text read as its field's type.

The one rule for text: an input of a string field, or of a field the wait does not declare, is
taken as typed; an input of an integer, number or boolean field is read from its text (`3`,
`2.5`, `true`); anything else (a whole answer, an input of another declared type) is JSON
text, and text that is not JSON is taken as a string when the schema takes a string, and
refused when it does not. A refusal
is an `AnswerRejected` whose `errors` name each field (`field: problem`), as the answer path's
own refusals do.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from tether.runtime.answer_rules import decision_answer
from tether.runtime.errors import AnswerRejected

ROOT: Final = "(root)"  # the name a whole answer goes by in a refusal
_INTEGER: Final = re.compile(r"[-+]?[0-9]+")
_NUMBER: Final = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")
_SHOWN: Final = 60  # characters of refused text quoted back


@dataclass(frozen=True)
class Value:
    """An answer that arrived as JSON: taken as it is.

    Attributes:
        value: The answer.
    """

    value: Any


@dataclass(frozen=True)
class Text:
    """A whole answer typed as text: JSON text, or a plain string where a string fits.

    Attributes:
        text: What was typed.
        field: The name a refusal gives it (the form field that held it, else `(root)`).
    """

    text: str
    field: str = ROOT


@dataclass(frozen=True)
class Form:
    """A decision (an approval's or a human task's; None for a typed signal or agent step
    form, whose answer is the fields alone) and its inputs.

    Attributes:
        decision: `approve`, `reject`, `push_back`, `complete`, a protocol gate's choice, or
            None.
        values: Inputs that arrived as JSON, taken as they are.
        texts: Inputs typed as text, each read as its field's type (over `values`).
        reason: A rejection's reason.
    """

    decision: str | None = None
    values: Mapping[str, Any] = field(default_factory=dict)
    texts: Mapping[str, str] = field(default_factory=dict)
    reason: str | None = None


Given = Value | Text | Form


def read(given: Given, wait: Mapping[str, Any] | None = None) -> Any:
    """The value `given` is as an answer to `wait` (its descriptor; None when the wait is not
    open, and nothing is known of its schema: text is then JSON, or else a string).

    Raises:
        AnswerRejected: text that cannot be read as its field's type, naming each field.
    """
    if isinstance(given, Value):
        return given.value
    problems: list[str] = []
    if isinstance(given, Text):
        schema = wait.get("schema") if wait is not None else None
        value = _json_text(schema, given.text, given.field, problems)
    else:
        value = _form(given, wait, problems)
    if problems:
        where = f"{wait['key']}: " if wait is not None and "key" in wait else ""
        raise AnswerRejected(where + "; ".join(problems), errors=problems)
    return value


def _form(form: Form, wait: Mapping[str, Any] | None, problems: list[str]) -> Any:
    values = dict(form.values)
    for name, text in form.texts.items():
        values[name] = _field_text(field_schema(wait, form.decision, name), text, name, problems)
    if form.decision is None:
        return values
    return decision_answer(form.decision, values, form.reason)


def field_schema(
    wait: Mapping[str, Any] | None, decision: str | None, name: str
) -> Mapping[str, Any] | None:
    """The schema of the answer's input `name` under `decision` (None: not declared): an
    approval's inputs are strings; a human task's are its form's fields, or its feedback's on
    a push-back; a signal's or agent step's are the properties of its schema."""
    if wait is None:
        return None
    kind = wait.get("kind")
    if kind == "approval":
        return {"type": "string"}
    if kind == "human_task":
        schema = wait.get("feedback") if decision == "push_back" else wait.get("form")
    else:
        schema = wait.get("schema")
    if not isinstance(schema, Mapping):
        return None
    props = schema.get("properties")
    prop = props.get(name) if isinstance(props, Mapping) else None
    return resolve_property(schema, prop) if isinstance(prop, Mapping) else None


def resolve_property(schema: Mapping[str, Any], prop: Mapping[str, Any]) -> Mapping[str, Any]:
    """A property of an object schema with its `$ref` (into the schema's `$defs`) and an
    Optional's `anyOf` (one type or null) unwrapped."""
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        prop = {**(schema.get("$defs") or {}).get(ref.rsplit("/", 1)[1], {}), **prop}
    options = prop.get("anyOf")
    if isinstance(options, list):
        typed = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
        if len(typed) == 1:
            return {**prop, **resolve_property(schema, typed[0])}
    return prop


def choices(prop: Mapping[str, Any]) -> tuple[Any, ...]:
    """The values a property allows (`enum`, or `oneOf` of `const`s); empty: any."""
    if isinstance(prop.get("enum"), list):
        return tuple(prop["enum"])
    one_of = prop.get("oneOf")
    if isinstance(one_of, list) and all(isinstance(o, dict) and "const" in o for o in one_of):
        return tuple(o["const"] for o in one_of)
    return ()


def scalar_type(prop: Mapping[str, Any] | None) -> str | None:
    """`string`, `integer`, `number` or `boolean` when the property is one of those (a choice
    of strings is a string); None for anything else."""
    if prop is None:
        return None
    kind = prop.get("type")
    if kind in ("string", "integer", "number", "boolean"):
        return str(kind)
    allowed = choices(prop)
    if allowed and all(isinstance(v, str) for v in allowed):
        return "string"
    return None


def _field_text(prop: Mapping[str, Any] | None, text: str, name: str, problems: list[str]) -> Any:
    """One input typed as text, read as its field's type (undeclared: as typed)."""
    kind = scalar_type(prop)
    if prop is None or kind == "string":
        return text
    bare = text.strip()
    if kind == "integer":
        if _INTEGER.fullmatch(bare):
            return int(bare)
        problems.append(f"{name}: {_shown(text)} is not an integer")
        return text
    if kind == "number":
        number = float(bare) if _NUMBER.fullmatch(bare) else math.nan
        if math.isfinite(number):
            return int(number) if number.is_integer() and abs(number) < 2**53 else number
        problems.append(f"{name}: {_shown(text)} is not a number")
        return text
    if kind == "boolean":
        if bare in ("true", "false"):
            return bare == "true"
        problems.append(f"{name}: {_shown(text)} is not true or false")
        return text
    return _json_text(prop, text, name, problems)


def _json_text(schema: Any, text: str, name: str, problems: list[str]) -> Any:
    """JSON text; text that is not JSON is the string itself where the schema takes one."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        if takes_string(schema):
            return text
    problems.append(f"{name}: {_shown(text)} is not JSON, and {name} takes no plain text")
    return text


def takes_string(schema: Any) -> bool:
    """Whether a JSON string may fit `schema`, as far as its own keywords say (no schema, a
    `string` type among its types, a string among its choices, or a branch that takes one)."""
    if not isinstance(schema, Mapping):
        return True
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind == "string"
    if isinstance(kind, list):
        return "string" in kind
    allowed = choices(schema)
    if allowed or "const" in schema:
        return any(isinstance(v, str) for v in (*allowed, schema.get("const")))
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list):
        return any(takes_string(b) for b in branches)
    return True


def _shown(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "…")
