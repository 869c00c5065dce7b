"""Guard conditions, pure (digest §6): `<path> <op> <value>` or a bare path; paths are
`step.field` or `run.params.x`; types compare strictly; no and/or."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import yaml

_OPS: Final = ("==", "!=", ">=", "<=", ">", "<")
_SPLIT: Final = re.compile(r"^\s*(\S+)\s*(==|!=|>=|<=|>|<)\s*(.+?)\s*$")


class Unresolvable(ValueError):
    """A path in a condition names nothing (the guard fails the run: resolution_error)."""


def resolve(path: str, params: Mapping[str, Any], outputs: Mapping[str, Any]) -> Any:
    head, *rest = path.split(".")
    if head == "run" and rest[:1] == ["params"]:
        value: Any = params
        rest = rest[1:]
    elif head in outputs:
        value = outputs[head]
    else:
        raise Unresolvable(f"'{path}' names no step output or run parameter")
    for part in rest:
        if not isinstance(value, dict) or part not in value:
            raise Unresolvable(f"'{path}' cannot be resolved")
        value = value[part]
    return value


def holds(condition: str, params: Mapping[str, Any], outputs: Mapping[str, Any]) -> bool:
    """Whether `condition` is true. Raises Unresolvable."""
    match = _SPLIT.match(condition)
    if match is None:
        return resolve(condition.strip(), params, outputs) is True
    path, op, literal = match.groups()
    left = resolve(path, params, outputs)
    right = yaml.safe_load(literal)
    if op == "==":
        return bool(type(left) is type(right) and left == right)
    if op == "!=":
        return bool(type(left) is not type(right) or left != right)
    numeric = (int, float)
    if not (isinstance(left, numeric) and isinstance(right, numeric)) or isinstance(left, bool):
        return False
    return {">": left > right, ">=": left >= right, "<": left < right, "<=": left <= right}[op]
