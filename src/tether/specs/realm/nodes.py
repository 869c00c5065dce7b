"""Located YAML for protocol workflows: the shared readers (`specs.yaml_nodes`) raising
`RealmSpecError`s, read as YAML 1.2 booleans, plus the readers only Realm's format needs.
"""

from __future__ import annotations

import re
from typing import cast

import yaml

from tether.specs import yaml_nodes
from tether.specs.realm.errors import InvalidValue, InvalidYaml, UnknownField
from tether.specs.yaml_nodes import (
    FLOAT,
    INT,
    boolean,
    integer,
    is_null,
    items,
    nonblank,
    plain,
    string,
    strings,
)

__all__ = [
    "At",
    "Fields",
    "boolean",
    "choice",
    "compose",
    "integer",
    "is_null",
    "items",
    "mapping",
    "nonblank",
    "number",
    "plain",
    "positive",
    "string",
    "strings",
]


class _Yaml12(yaml.SafeLoader):
    """SafeLoader reading booleans as YAML 1.2 does (Realm's parser): only true / false, so
    `yes`, `no`, `on` and `off` stay text."""


_Yaml12.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


class At(yaml_nodes.At):
    """A place in a protocol workflow; its refusals are `InvalidValue` unless told otherwise."""

    invalid = InvalidValue
    unknown = UnknownField


Fields = yaml_nodes.Fields[At]


def compose(text: str, file: str) -> yaml.MappingNode:
    """The single YAML document in `text` as a mapping node.

    Raises:
        InvalidYaml: not YAML, several documents, or not a mapping.
    """
    return yaml_nodes.compose(text, file, loader=_Yaml12, error=InvalidYaml, what="a workflow")


def number(node: yaml.Node, at: At, *, minimum: float | None = None) -> int | float:
    """An integer or a float (never a boolean, never quoted)."""
    value: object = None
    if isinstance(node, yaml.ScalarNode) and node.tag in (INT, FLOAT):
        value = plain(node)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        at.fail("must be a number")
    if minimum is not None and value < minimum:
        at.fail(f"must be at least {minimum}")
    return value


def positive(node: yaml.Node, at: At) -> int:
    """A whole number above 0."""
    if isinstance(node, yaml.ScalarNode) and node.tag == INT:
        value = plain(node)
        if isinstance(value, int) and value > 0:
            return value
    return at.fail("must be a positive integer")


def choice(node: yaml.Node, at: At, options: tuple[str, ...]) -> str:
    """One of `options`; the refusal lists them."""
    value = string(node, at)
    if value not in options:
        at.fail(f"must be one of {', '.join(options)} (found {value!r})")
    return value


def mapping(node: yaml.Node, at: At) -> dict[str, object]:
    """A mapping with string keys, as plain data."""
    if not isinstance(node, yaml.MappingNode):
        at.fail("must be a mapping")
    Fields(node, at)  # refuses non-string and duplicate keys, with their lines
    return cast(dict[str, object], plain(node))
