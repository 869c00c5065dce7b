"""Draft-07 JSON Schema blocks, strict: checked at load, `format` refused, `default` not applied.

`Schema` wraps one checked document; `validate_payload(schema, value)` lists the violations
(empty when the value fits). Violations use Ajv's words and params, as Realm's replies do
(`/title must NOT have fewer than 4 characters`, `(root) must have required property 'x'`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from jsonschema import Draft7Validator
from jsonschema.exceptions import SchemaError, ValidationError

_SCHEMA_MAPS = ("properties", "patternProperties", "definitions", "$defs", "dependencies")
_SCHEMA_ONE = (
    "additionalItems",
    "additionalProperties",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
    "not",
    "items",
)
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "items")


@dataclass(frozen=True)
class Violation:
    """One way a value does not fit: `instance_path` is a JSON pointer (`""` is the root)."""

    instance_path: str
    schema_path: str
    keyword: str
    message: str
    params: Mapping[str, object] = field(default_factory=dict)

    def as_ajv(self) -> dict[str, object]:
        """Ajv's error shape (`instancePath`, `schemaPath`, `keyword`, `params`, `message`)."""
        return {
            "instancePath": self.instance_path,
            "schemaPath": self.schema_path,
            "keyword": self.keyword,
            "params": dict(self.params),
            "message": self.message,
        }

    def __str__(self) -> str:
        return f"{self.instance_path or '(root)'} {self.message}"


@dataclass(frozen=True, eq=False)
class Schema:
    """A checked draft-07 schema document (plain JSON data; treat it as read-only).

    Its validator is built when it first validates, and it pickles as its document alone (a
    plan read in another process crosses back with its schemas; the validator would not).
    """

    document: Mapping[str, Any] | bool

    @functools.cached_property
    def _validator(self) -> Draft7Validator:
        return Draft7Validator(self.document)

    def violations(self, value: object) -> list[Violation]:
        return [_violation(e) for e in self._validator.iter_errors(value)]

    def __reduce__(self) -> tuple[Any, ...]:
        return (Schema, (self.document,))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and self.document == other.document

    def __hash__(self) -> int:
        return hash(repr(self.document))


def validate_payload(schema: Schema | None, value: object) -> list[Violation]:
    """The violations of `value` against `schema` (none without a schema), in document order."""
    if schema is None:
        return []
    return sorted(schema.violations(value), key=lambda v: (v.instance_path, v.schema_path))


def check_schema(document: object) -> str | None:
    """Why `document` is not an acceptable schema block (None when it is).

    It must be a draft-07 schema (an object or a boolean) that uses no `format` keyword and
    no `$ref` outside itself.
    """
    if not isinstance(document, (dict, bool)):
        return "a JSON Schema must be a mapping (or a boolean)"
    try:
        Draft7Validator.check_schema(document)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        return f"not a valid draft-07 schema at {where}: {exc.message}"
    for where, why in _refused(document, ""):
        return f"{why} (at {where or '(root)'})"
    return None


def _refused(node: object, where: str) -> Iterator[tuple[str, str]]:
    """The places where a subschema of `node` uses `format`, or a `$ref` outside the document
    (which a validator would fetch)."""
    if not isinstance(node, dict):
        return
    if "format" in node:
        yield f"{where}/format", "`format` is not supported in schemas"
    ref = node.get("$ref")
    if isinstance(ref, str) and not ref.startswith("#"):
        yield f"{where}/$ref", "only a `$ref` within the same schema (`#…`) is supported"
    for key in _SCHEMA_MAPS:
        sub = node.get(key)
        if isinstance(sub, dict):
            for name, child in sub.items():
                yield from _refused(child, f"{where}/{key}/{name}")
    for key in _SCHEMA_ONE:
        yield from _refused(node.get(key), f"{where}/{key}")
    for key in _SCHEMA_LISTS:
        sub = node.get(key)
        if isinstance(sub, list):
            for i, child in enumerate(sub):
                yield from _refused(child, f"{where}/{key}/{i}")


def _violation(error: ValidationError) -> Violation:
    """jsonschema's error in Ajv's words and params (Realm replies with Ajv's errors)."""
    pointer = "".join(f"/{p}" for p in error.absolute_path)
    schema_path = "#" + "".join(f"/{p}" for p in error.absolute_schema_path)
    keyword = str(error.validator)
    words = _AJV.get(keyword)
    message, params = words(error) if words else (error.message, {})
    return Violation(pointer, schema_path, keyword, message, params)


_Words = tuple[str, dict[str, object]]


def _required(error: ValidationError) -> _Words:
    have = error.instance if isinstance(error.instance, dict) else {}
    wanted = error.validator_value if isinstance(error.validator_value, list) else []
    name = next((k for k in wanted if k not in have), "")
    return f"must have required property '{name}'", {"missingProperty": name}


def _additional(error: ValidationError) -> _Words:
    schema = error.schema if isinstance(error.schema, dict) else {}
    declared = schema.get("properties") or {}
    patterns = list(schema.get("patternProperties") or {})
    have = error.instance if isinstance(error.instance, dict) else {}
    extra = next(
        (k for k in have if k not in declared and not any(re.search(p, k) for p in patterns)),
        "",
    )
    return "must NOT have additional properties", {"additionalProperty": extra}


def _limit(text: str, unit: str = "") -> Callable[[ValidationError], _Words]:
    def words(error: ValidationError) -> _Words:
        return f"must {text} {error.validator_value}{unit}", {"limit": error.validator_value}

    return words


def _type(error: ValidationError) -> _Words:
    value = error.validator_value
    return f"must be {','.join(value) if isinstance(value, list) else value}", {"type": value}


def _simple(message: str, param: str) -> Callable[[ValidationError], _Words]:
    def words(error: ValidationError) -> _Words:
        value = error.validator_value
        return message.format(value=value), ({param: value} if param else {})

    return words


_AJV: Final[Mapping[str, Callable[[ValidationError], _Words]]] = {
    "required": _required,
    "additionalProperties": _additional,
    "type": _type,
    "enum": _simple("must be equal to one of the allowed values", "allowedValues"),
    "const": _simple("must be equal to constant", "allowedValue"),
    "pattern": _simple('must match pattern "{value}"', "pattern"),
    "multipleOf": _simple("must be multiple of {value}", "multipleOf"),
    "uniqueItems": _simple("must NOT have duplicate items", ""),
    "minLength": _limit("NOT have fewer than", " characters"),
    "maxLength": _limit("NOT have more than", " characters"),
    "minItems": _limit("NOT have fewer than", " items"),
    "maxItems": _limit("NOT have more than", " items"),
    "minProperties": _limit("NOT have fewer than", " properties"),
    "maxProperties": _limit("NOT have more than", " properties"),
    "minimum": _limit("be >="),
    "maximum": _limit("be <="),
    "exclusiveMinimum": _limit("be >"),
    "exclusiveMaximum": _limit("be <"),
}
