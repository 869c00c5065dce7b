"""Dagu v2's rich parameter entries (`{name, type, default, required, enum, minimum, maximum,
min_length, max_length, pattern, eval, description}`): parsed at load time, and a run's value
checked against them. Pure.

A parameter's value stays text (what a step sees); its `type` says how the text must read:
`integer` (an int64, `-3`), `number` (a finite decimal), `boolean` (`true` / `false`, `1` /
`0`, `t` / `f`, any case, as Go's `strconv.ParseBool`), or `string` (the default). The
constraints are checked on the value so read: `enum` (values of the type), `minimum` /
`maximum` (numbers), `min_length` / `max_length` / `pattern` (strings; the pattern is searched,
not anchored, as Go's `MatchString`). The default, and each `enum` value, must pass them at
load time. `eval` is shell text whose output is the default when the run is not given one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Final

import yaml

from tether.specs import patterns
from tether.specs.dag.nodes import At, Fields, boolean, integer, items, nonblank, plain, string
from tether.specs.scalar_forms import SCALAR_TYPES, value_errors

_NUMERIC: Final = ("integer", "number")
_TRUE: Final = frozenset(("1", "t", "true"))
_FALSE: Final = frozenset(("0", "f", "false"))
_HINTS: Final = {"minLength": "use min_length", "maxLength": "use max_length"}


@dataclass(frozen=True)
class ParamRules:
    """What a rich entry declares beyond its name and default. `schema` is a flat JSON schema
    property (`type`, `enum`, `minimum`, `maximum`, `minLength`, `maxLength`, `pattern`), as
    pairs so the rules stay hashable."""

    schema: tuple[tuple[str, Any], ...] = ()
    required: bool = False
    has_default: bool = False
    eval: str | None = None
    description: str | None = None

    @property
    def kind(self) -> str:
        return str(dict(self.schema).get("type", "string"))

    def problems(self, text: str) -> list[str]:
        """Why `text` is not a valid value of the parameter (empty: it is)."""
        try:
            value = typed(self.kind, text)
        except ValueError as exc:
            return [str(exc)]
        return value_errors(_prop(self.schema), value)


def parse_rich(fields: Fields, name_at: At) -> tuple[str, ParamRules | None]:
    """The default text and the rules of a rich entry whose `name` was taken from `fields`
    (None when it declares nothing to check: a string with at most a default and a
    description)."""
    default, kind_f = fields.take("default"), fields.take("type")
    kind = (string(*kind_f).strip() or "string") if kind_f else "string"
    if kind_f and kind not in SCALAR_TYPES:
        kind_f[1].fail(f"type must be one of {', '.join(SCALAR_TYPES)}")
    schema: dict[str, Any] = {"type": kind}
    for key, spelled in (("minimum", "minimum"), ("maximum", "maximum")):
        if taken := fields.take(spelled):
            if kind not in _NUMERIC:
                taken[1].fail(f"`{spelled}` needs type integer or number, not {kind}")
            schema[key] = _number(*taken)
    for key, spelled in (("minLength", "min_length"), ("maxLength", "max_length")):
        if taken := fields.take(spelled):
            if kind != "string":
                taken[1].fail(f"`{spelled}` needs type string, not {kind}")
            schema[key] = integer(*taken, minimum=0)
    if taken := fields.take("pattern"):
        if kind != "string":
            taken[1].fail(f"`pattern` needs type string, not {kind}")
        schema["pattern"] = _pattern(*taken)
    _check_ranges(schema, name_at)
    if taken := fields.take("enum"):
        schema["enum"] = tuple(_enum_value(kind, n, a) for n, a in items(*taken))
    required, evaluated, described = (fields.take(k) for k in ("required", "eval", "description"))
    fields.finish(_HINTS)
    rules = ParamRules(
        schema=tuple(schema.items()),
        required=boolean(*required) if required else False,
        has_default=default is not None,
        eval=nonblank(*evaluated).strip() if evaluated else None,
        description=string(*described) if described else None,
    )
    text = _default_text(default[0], kind) if default else ""
    if default and (problems := rules.problems(text)):
        default[1].fail(f"the default {problems[0]}")
    plain_string = rules.schema == (("type", "string"),) and not (rules.required or rules.eval)
    return text, None if plain_string else rules


def typed(kind: str, text: str) -> Any:
    """`text` read as a value of `kind`.

    Raises:
        ValueError: it does not read so.
    """
    if kind == "string":
        return text
    word = text.strip()
    if kind == "boolean":
        if word.lower() in _TRUE or word.lower() in _FALSE:
            return word.lower() in _TRUE
        raise ValueError(f"{text!r} is not a boolean (true or false)")
    if kind == "integer":
        if re.fullmatch(r"[+-]?[0-9]+", word) is None:
            raise ValueError(f"{text!r} is not an integer")
        return int(word)
    try:
        number = float(word)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"{text!r} is not a finite number")
    return number


def _prop(schema: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    prop = dict(schema)
    if "enum" in prop:
        prop["enum"] = list(prop["enum"])
    return prop


def _number(node: yaml.Node, at: At) -> float:
    value = plain(node)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return at.fail("must be a number")
    return float(value)


def _pattern(node: yaml.Node, at: At) -> str:
    pattern = string(node, at)
    if (why := patterns.check(pattern)) is not None:
        at.fail(f"not a valid regular expression (RE2 syntax): {why}")
    return pattern


def _check_ranges(schema: dict[str, Any], at: At) -> None:
    for low, high in (("minimum", "maximum"), ("minLength", "maxLength")):
        if low in schema and high in schema and schema[low] > schema[high]:
            at.fail(f"{low} must not be above {high}")


def _enum_value(kind: str, node: yaml.Node, at: At) -> Any:
    try:
        return typed(kind, _default_text(node, kind))
    except ValueError as exc:
        return at.fail(str(exc))


def _default_text(node: yaml.Node, kind: str) -> str:
    """A written default or enum value as the text a step sees (`true`, `3`, `1.5`)."""
    value = plain(node)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer() and kind == "integer":
        return str(int(value))
    return str(value)
