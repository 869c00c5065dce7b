"""Located YAML for DAG specs: the shared readers (`specs.yaml_nodes`) raising `DagSpecError`s.

Dagu reads YAML 1.1 (PyYAML's SafeLoader): `yes`, `no`, `on` and `off` are booleans.
"""

from __future__ import annotations

import yaml

from tether.specs import yaml_nodes
from tether.specs.dag.errors import InvalidValue, InvalidYaml, LimitExceeded, UnknownField
from tether.specs.limits import SpecLimits
from tether.specs.yaml_nodes import (
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
    "compose",
    "integer",
    "is_null",
    "items",
    "nonblank",
    "plain",
    "string",
    "strings",
]


class At(yaml_nodes.At):
    """A place in a DAG spec; its refusals are `InvalidValue` unless told otherwise."""

    invalid = InvalidValue
    unknown = UnknownField


Fields = yaml_nodes.Fields[At]


def compose(text: str, file: str, limits: SpecLimits | None = None) -> yaml.MappingNode:
    """The single YAML document in `text` as a mapping node.

    Raises:
        InvalidYaml: not YAML, several documents, or not a mapping.
        LimitExceeded: over one of `limits` (bytes, depth, aliases).
    """
    return yaml_nodes.compose(
        text,
        file,
        loader=yaml.SafeLoader,
        error=InvalidYaml,
        what="a DAG spec",
        limits=limits,
        too_large=LimitExceeded,
    )
