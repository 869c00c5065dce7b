"""Flat scalar forms (Dagu specs 008 and 031), checked without coercion. Pure.

A form is a JSON object schema whose properties are scalars: `type` string / integer / number /
boolean, with `enum`, `oneOf: [{const}]`, `minimum`, `maximum`, `minLength`, `maxLength`,
`pattern`, `default`; the root has `required` and `additionalProperties`. The rules:

- declared values keep their JSON type: `"3"` is not an integer, `true` is not a number;
- an integer is a whole int64 written as an integer (`3.0` is refused, as Go's
  `json.Number.Int64` refuses it: Dagu reads integers that way); a number is finite;
- `enum` / `oneOf` compare numbers numerically (`1` equals `1.0`), never a boolean with a number;
- `pattern` (RE2 syntax, as Go's `regexp`) matches anywhere in the text; lengths count code
  points;
- undeclared members are refused unless `additionalProperties` is true;
- with no properties at all, any member is refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from tether.specs import patterns

#: The types a form's property (and a DAG parameter) may declare.
SCALAR_TYPES: Final = ("string", "integer", "number", "boolean")
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1


def form_errors(form: Mapping[str, Any], values: Any) -> list[str]:
    """Why `values` does not fill `form` (empty: it does)."""
    if not isinstance(values, dict):
        return ["(root): the answer must be a JSON object"]
    props: Mapping[str, Any] = form.get("properties") or {}
    errors = [
        f"{name}: required"
        for name in form.get("required") or []
        if name not in values and "default" not in props.get(name, {})
    ]
    for name, value in values.items():
        prop = props.get(name)
        if prop is None:
            if not form.get("additionalProperties", False):
                errors.append(f"{name}: not a field of this form")
            continue
        errors += [f"{name}: {problem}" for problem in value_errors(prop, value)]
    return errors


def with_defaults(form: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """The canonical answer: the declared defaults, overridden by the supplied values."""
    props: Mapping[str, Any] = form.get("properties") or {}
    out = {n: p["default"] for n, p in props.items() if "default" in p}
    out.update(values)
    return out


def value_errors(prop: Mapping[str, Any], value: Any) -> list[str]:
    """Why one value does not fit one scalar property."""
    kind = prop.get("type")
    problem = _type_problem(kind, value)
    if problem:
        return [problem]
    errors = []
    choices = prop.get("enum") or [o["const"] for o in prop.get("oneOf") or []]
    if choices and not any(_same(value, c) for c in choices):
        errors.append(f"must be one of {list(choices)}")
    if kind in ("integer", "number"):
        if "minimum" in prop and value < prop["minimum"]:
            errors.append(f"must be at least {prop['minimum']}")
        if "maximum" in prop and value > prop["maximum"]:
            errors.append(f"must be at most {prop['maximum']}")
    if kind == "string":
        if "minLength" in prop and len(value) < prop["minLength"]:
            errors.append(f"must have at least {prop['minLength']} characters")
        if "maxLength" in prop and len(value) > prop["maxLength"]:
            errors.append(f"must have at most {prop['maxLength']} characters")
        if "pattern" in prop and not patterns.search(prop["pattern"], value):
            errors.append(f"must match {prop['pattern']!r}")
    return errors


def _type_problem(kind: Any, value: Any) -> str | None:
    if kind == "string":
        return None if isinstance(value, str) else "must be a string"
    if kind == "boolean":
        return None if isinstance(value, bool) else "must be a boolean"
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            return "must be an integer (written without a fraction)"
        return None if INT64_MIN <= value <= INT64_MAX else "must fit in 64 bits"
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "must be a number"
        return None if math.isfinite(value) else "must be finite"
    return f"has an unsupported type {kind!r}"


def _same(value: Any, choice: Any) -> bool:
    if isinstance(value, bool) or isinstance(choice, bool):
        return isinstance(value, bool) and isinstance(choice, bool) and value == choice
    if isinstance(value, int | float) and isinstance(choice, int | float):
        return float(value) == float(choice)
    return bool(type(value) is type(choice) and value == choice)
