"""Conditions (`when`, `preconditions`, `abort_unless`): grammar, parser, strict evaluator.

Grammar (Realm's, no `and`/`or`/`not`; a list means "all of"):

    condition := path [op value]
    op        := == | != | > | >= | < | <=
    path      := <step>.<key>[.<key>…] | run.params.<key>[…] | $settlement.<step>.<field>
    value     := 'text' | "text" | number | true | false | null | bare-word (text)

Types are compared strictly: a number never equals text, `true` is not `'true'`, and an
ordering (`>`, `>=`, `<`, `<=`) holds only when both operands are numbers. A key made of digits
selects a list item. How a missing value, `null` and `run.params` are read depends on the field (see
`evaluate`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, cast

from tether.specs.realm.model import (
    Condition,
    ConditionField,
    ConditionPath,
    Operator,
    Scalar,
    Settlement,
)

OPERATORS: Final[tuple[Operator, ...]] = (">=", "<=", "==", "!=", ">", "<")
SETTLEMENT_FIELDS: Final = ("failed", "settled_by_default", "validation_rejections")
_SEGMENT: Final = re.compile(r"^[^\s.'\"=!<>]+$")
_NUMBER: Final = re.compile(r"^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")
_JOINERS: Final = {"and": "and", "or": "or", "not": "not", "&&": "and", "||": "or", "!": "not"}


class ConditionSyntaxError(ValueError):
    """The condition text is not in the grammar; the message says what to write instead."""


class ConditionUnresolved(LookupError):
    """An `abort_unless` condition's path finds nothing (or reads `run.params`): the run fails."""


@dataclass(frozen=True)
class ConditionContext:
    """What conditions read: completed steps' outputs, the run's params, `$settlement`."""

    outputs: Mapping[str, object] = field(default_factory=dict)
    params: Mapping[str, object] = field(default_factory=dict)
    settlements: Mapping[str, Settlement] = field(default_factory=dict)


def parse_condition(text: str, where: ConditionField) -> Condition:
    """Parse one condition written in the field `where`.

    Raises:
        ConditionSyntaxError: not in the grammar (and/or/not, bad path, bad value, a bare
            path in `preconditions`).
    """
    source = text.strip()
    if not source:
        raise ConditionSyntaxError("a condition must not be blank")
    _refuse_joiners(source, where)
    split = _split(source)
    if split is None:
        if where == "preconditions":
            raise ConditionSyntaxError(
                f"precondition {source!r} is a bare path; a precondition needs an operator "
                "and a value, as in 'check.score >= 3'"
            )
        return Condition(source, where, parse_path(source))
    left, op, right = split
    return Condition(source, where, parse_path(left.strip()), op, _literal(right.strip()))


def parse_path(text: str) -> ConditionPath:
    """`<step>.<key>…`, `run.params.<key>…` or `$settlement.<step>.<field>`.

    Raises:
        ConditionSyntaxError: any other shape.
    """
    parts = text.split(".")
    if len(parts) < 2 or not all(_SEGMENT.match(p) for p in parts):
        raise ConditionSyntaxError(
            f"{text!r} is not a path: write <step>.<field>, run.params.<name> "
            "or $settlement.<step>.<field>"
        )
    head, *rest = parts
    if head == "run":
        if rest[0] != "params" or len(rest) < 2:
            raise ConditionSyntaxError(f"{text!r}: the only run path is run.params.<name>")
        return ConditionPath("params", None, tuple(rest[1:]), text)
    if head == "$settlement":
        if len(rest) != 2 or rest[1] not in SETTLEMENT_FIELDS:
            raise ConditionSyntaxError(
                f"{text!r}: write $settlement.<step>.<field>, field one of "
                + ", ".join(SETTLEMENT_FIELDS)
            )
        return ConditionPath("settlement", rest[0], (rest[1],), text)
    if head.startswith("$"):
        raise ConditionSyntaxError(f"{text!r}: unknown root {head!r}")
    return ConditionPath("step", head, tuple(rest), text)


def _refuse_joiners(source: str, where: ConditionField) -> None:
    for word in _unquoted(source).split():
        joiner = _JOINERS.get(word.lower())
        if joiner == "and":
            raise ConditionSyntaxError(
                f"{where!r} has no 'and': give the conditions as a list, all of which must hold"
            )
        if joiner == "or":
            raise ConditionSyntaxError(
                f"{where!r} has no 'or': split the branches into separate steps, or join them "
                "with trigger_rule: one_success"
            )
        if joiner == "not":
            raise ConditionSyntaxError(f"{where!r} has no 'not': compare with != instead")


def _unquoted(source: str) -> str:
    """`source` with quoted text blanked out (operators inside quotes are text)."""
    out: list[str] = []
    quote: str | None = None
    for char in source:
        if quote is None and char in "'\"":
            quote = char
            out.append(" ")
        elif quote is not None:
            quote = None if char == quote else quote
            out.append(" ")
        else:
            out.append(char)
    if quote is not None:
        raise ConditionSyntaxError(f"unterminated quote in {source!r}")
    return "".join(out)


def _split(source: str) -> tuple[str, Operator, str] | None:
    bare = _unquoted(source)
    for i in range(len(bare)):
        for op in OPERATORS:
            if bare.startswith(op, i):
                if any(o in bare[i + len(op) :] for o in OPERATORS):
                    raise ConditionSyntaxError(f"{source!r} has more than one operator")
                return source[:i], op, source[i + len(op) :]
    return None


def _literal(text: str) -> Scalar:
    if not text:
        raise ConditionSyntaxError("a comparison needs a value after its operator")
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text[0] in "'\"":
        raise ConditionSyntaxError(f"text {text!r} must be one quoted value")
    if text in ("true", "false"):
        return text == "true"
    if text == "null":
        return None
    if _NUMBER.match(text):
        number = float(text)
        return int(number) if re.fullmatch(r"-?\d+", text) else number
    if any(c.isspace() for c in text):
        raise ConditionSyntaxError(f"text {text!r} contains spaces: put it in quotes")
    return text


MISSING: Final = object()


def resolve(path: ConditionPath, context: ConditionContext) -> object:
    """The value at `path`, or `MISSING` when it finds nothing."""
    value: object
    if path.root == "params":
        value = context.params
    elif path.root == "settlement":
        settled = context.settlements.get(cast(str, path.step))
        if settled is None:
            return MISSING
        return getattr(settled, path.keys[0])
    else:
        value = context.outputs.get(cast(str, path.step), MISSING)
    for key in path.keys:
        value = _child(value, key)
    return value


def _child(value: object, key: str) -> object:
    if isinstance(value, Mapping):
        return value.get(key, MISSING)
    if isinstance(value, (list, tuple)) and key.isdigit() and int(key) < len(value):
        return value[int(key)]
    return MISSING


def evaluate(condition: Condition, context: ConditionContext) -> bool:
    """Whether `condition` holds, as Realm reads it in its field.

    `when`: a missing value is false except `== null` (true for missing or null);
    `!= null` is true for a present non-null value; `run.params` is read.
    `preconditions`: `run.params` is not read (false); a missing value is false; any
    comparison with `null` is false.
    `abort_unless`: like `preconditions`, but a missing value or `run.params` raises.

    Raises:
        ConditionUnresolved: an `abort_unless` path finds nothing or reads `run.params`.
    """
    path = condition.path
    if path.root == "params" and condition.field != "when":
        if condition.field == "abort_unless":
            raise ConditionUnresolved(f"{path.text!r}: run.params is not read by abort_unless")
        return False
    value = resolve(path, context)
    if value is MISSING and condition.field == "abort_unless":
        raise ConditionUnresolved(f"{path.text!r} finds nothing")
    if condition.op is None:
        return value is not MISSING and truthy(value)
    if condition.value is None:
        if condition.field != "when":
            return False
        is_null = value is MISSING or value is None
        return is_null if condition.op == "==" else (not is_null and condition.op == "!=")
    if value is MISSING:
        return False
    return compare(value, condition.op, condition.value)


def explain(
    conditions: tuple[Condition, ...], context: ConditionContext
) -> list[dict[str, object]]:
    """Each condition with what it read (get_run_state's `skip_details` leaves and
    `abort_context` conditions): `leaf`, `lhs_present`, `resolved_value`, `passed`."""
    out: list[dict[str, object]] = []
    for c in conditions:
        unread = c.path.root == "params" and c.field != "when"
        value = MISSING if unread else resolve(c.path, context)
        try:
            passed = evaluate(c, context)
        except ConditionUnresolved:
            passed = False
        present = value is not MISSING
        out.append(
            {
                "leaf": c.text,
                "lhs_present": present,
                "resolved_value": value if present else None,
                "passed": passed,
            }
        )
    return out


def truthy(value: object) -> bool:
    """JavaScript truthiness: false, 0, NaN, '' and null are false; lists and maps are true."""
    if value is None or value is False:
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value != 0 and not math.isnan(value)
    if isinstance(value, str):
        return value != ""
    return True


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def compare(left: object, op: Operator, right: object) -> bool:
    """Strict comparison: equal only with the same JSON type; order only between numbers."""
    if op in ("==", "!="):
        same = _strict_equal(left, right)
        return same if op == "==" else not same
    if not (_is_number(left) and _is_number(right)):
        return False
    a, b = cast(float, left), cast(float, right)
    return {">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b}[op]


def _strict_equal(left: object, right: object) -> bool:
    if _is_number(left) and _is_number(right):
        return left == right
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, str) and isinstance(right, str):
        return left == right
    return left is None and right is None
