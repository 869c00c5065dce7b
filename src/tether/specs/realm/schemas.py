"""Draft-07 JSON Schema blocks, strict: checked at load, `format` refused, `default` not applied.

`Schema` wraps one checked document; `validate_payload(schema, value)` lists the violations
(empty when the value fits). Violations read like Ajv's errors, which Realm replies with.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

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
    """A checked draft-07 schema document (plain JSON data; treat it as read-only)."""

    document: Mapping[str, Any] | bool
    _validator: Draft7Validator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_validator", Draft7Validator(self.document))

    def violations(self, value: object) -> list[Violation]:
        return [_violation(e) for e in self._validator.iter_errors(value)]

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

    It must be a draft-07 schema (an object or a boolean) that uses no `format` keyword.
    """
    if not isinstance(document, (dict, bool)):
        return "a JSON Schema must be a mapping (or a boolean)"
    try:
        Draft7Validator.check_schema(document)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        return f"not a valid draft-07 schema at {where}: {exc.message}"
    for where in _formats(document, ""):
        return f"`format` is not supported in schemas (at {where or '(root)'})"
    return None


def _formats(node: object, where: str) -> Iterator[str]:
    """The places where a subschema of `node` uses the `format` keyword."""
    if not isinstance(node, dict):
        return
    if "format" in node:
        yield f"{where}/format"
    for key in _SCHEMA_MAPS:
        sub = node.get(key)
        if isinstance(sub, dict):
            for name, child in sub.items():
                yield from _formats(child, f"{where}/{key}/{name}")
    for key in _SCHEMA_ONE:
        yield from _formats(node.get(key), f"{where}/{key}")
    for key in _SCHEMA_LISTS:
        sub = node.get(key)
        if isinstance(sub, list):
            for i, child in enumerate(sub):
                yield from _formats(child, f"{where}/{key}/{i}")


def _violation(error: ValidationError) -> Violation:
    pointer = "".join(f"/{p}" for p in error.absolute_path)
    schema_path = "#" + "".join(f"/{p}" for p in error.absolute_schema_path)
    keyword = str(error.validator)
    params: dict[str, object] = {keyword: error.validator_value}
    required = error.validator_value
    if keyword == "required" and isinstance(error.instance, dict) and isinstance(required, list):
        missing = [k for k in required if k not in error.instance]
        params = {"missingProperty": missing[0]} if missing else params
    return Violation(pointer, schema_path, keyword, error.message, params)
