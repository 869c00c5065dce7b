"""Conditions: the grammar, and how each field reads values, types, `null` and missing paths."""

from __future__ import annotations

import pytest

from tether.specs.realm import (
    ConditionContext,
    ConditionSyntaxError,
    ConditionUnresolved,
    Settlement,
    evaluate,
    parse_condition,
)
from tether.specs.realm.model import ConditionField

DATA = {
    "n": 7,
    "numstr": "7",
    "price": 12.5,
    "neg": -3.6,
    "s": "shipping",
    "t": True,
    "f": False,
    "z": 0,
    "e": "",
    "nul": None,
    "list": ["a"],
    "empty_list": [],
    "obj": {"k": 1},
}
CONTEXT = ConditionContext(
    outputs={"data": DATA},
    params={"mode": "dry"},
    settlements={"data": Settlement(failed=False, settled_by_default=False)},
)

# How `when` reads each condition against DATA (true: the step runs).
WHEN: list[tuple[str, bool]] = [
    ("data.n == 7", True),
    ("data.n == '7'", False),
    ("data.numstr == '7'", True),
    ("data.numstr == 7", False),
    ("data.n != 7", False),
    ("data.n > 3", True),
    ("data.n >= 7", True),
    ("data.n < 7", False),
    ("data.n <= 7", True),
    ("data.price >= 12.5", True),
    ("data.neg < -1", True),
    ("data.s > 3", False),
    ("data.s == 'shipping'", True),
    ('data.s == "shipping"', True),
    ("data.s == shipping", True),
    ("data.s == 'Shipping'", False),
    ("data.s != 'shipping'", False),
    ("data.s == 'a >= b'", False),
    ("data.t == true", True),
    ("data.f == false", True),
    ("data.t == 'true'", False),
    ("data.t", True),
    ("data.f", False),
    ("data.z", False),
    ("data.e", False),
    ("data.nul", False),
    ("data.missing", False),
    ("data.list", True),
    ("data.empty_list", True),
    ("data.obj", True),
    ("data.missing == null", True),
    ("data.nul == null", True),
    ("data.missing != null", False),
    ("data.n != null", True),
    ("data.missing == 'x'", False),
    ("data.missing != 'x'", False),
    ("data.missing > 1", False),
    ("data.obj.k == 1", True),
    ("data.list.0 == 'a'", True),
    ("run.params.mode == 'dry'", True),
    ("run.params.absent == null", True),
    ("$settlement.data.failed == false", True),
    ("$settlement.data.settled_by_default == false", True),
    ("$settlement.data.validation_rejections == 0", True),
    # strict types: a boolean is not a number, 1 equals 1.0
    ("data.t == 1", False),
    ("data.z == false", False),
    ("data.n == 7.0", True),
    ("data.t > 0", False),
]


@pytest.mark.parametrize(("text", "expected"), WHEN)
def test_when_reads_as_realm_does(text: str, expected: bool) -> None:
    assert evaluate(parse_condition(text, "when"), CONTEXT) is expected


# Where preconditions and abort_unless read a condition differently from `when`.
@pytest.mark.parametrize(
    ("text", "field", "expected"),
    [
        ("data.nul == null", "preconditions", False),
        ("data.missing == null", "preconditions", False),
        ("run.params.mode == 'dry'", "preconditions", False),
        ("data.missing == 'x'", "preconditions", False),
        ("data.nul == null", "abort_unless", False),
        ("data.n == 7", "abort_unless", True),
        ("data.s", "abort_unless", True),
        ("data.z", "abort_unless", False),
    ],
)
def test_preconditions_and_abort_unless_differ(
    text: str, field: ConditionField, expected: bool
) -> None:
    assert evaluate(parse_condition(text, field), CONTEXT) is expected


@pytest.mark.parametrize("text", ["data.missing == 1", "run.params.mode == 'dry'", "other.x"])
def test_abort_unless_cannot_resolve(text: str) -> None:
    with pytest.raises(ConditionUnresolved):
        evaluate(parse_condition(text, "abort_unless"), CONTEXT)


def test_a_step_with_no_settlement_reads_as_missing() -> None:
    condition = parse_condition("$settlement.other.failed == null", "when")
    assert evaluate(condition, CONTEXT) is True


def test_parse_keeps_the_parts() -> None:
    condition = parse_condition("  order.items.0.sku != 'A-1'  ", "when")
    assert (condition.text, condition.op, condition.value) == (
        "order.items.0.sku != 'A-1'",
        "!=",
        "A-1",
    )
    assert (condition.path.root, condition.path.step, condition.path.keys) == (
        "step",
        "order",
        ("items", "0", "sku"),
    )
    params = parse_condition("run.params.n >= -2.5", "when")
    assert (params.path.root, params.path.step, params.path.keys, params.value) == (
        "params",
        None,
        ("n",),
        -2.5,
    )
    assert parse_condition("a.b == null", "when").value is None
    assert parse_condition("a.b == 7", "when").value == 7
    assert isinstance(parse_condition("a.b == 7", "when").value, int)


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("a.x == 1 and a.y == 2", "when", "give the conditions as a list"),
        ("a.x == 1 or a.y == 2", "when", "one_success"),
        ("not a.x", "when", "'not'"),
        ("a.x == 1 && a.y == 2", "when", "'and'"),
        ("a.x", "preconditions", "needs an operator and a value"),
        ("a", "when", "not a path"),
        ("a.x ==", "when", "needs a value"),
        ("a.x == 'b", "when", "unterminated"),
        ("a.x == 1 == 2", "when", "more than one operator"),
        ("a.x == two words", "when", "put it in quotes"),
        ("run.params", "when", "run.params.<name>"),
        ("run.env.x == 1", "when", "run.params.<name>"),
        ("$settlement.a == 1", "when", "$settlement.<step>.<field>"),
        ("$foo.a == 1", "when", "unknown root"),
        ("   ", "when", "blank"),
    ],
)
def test_syntax_refusals(text: str, field: ConditionField, words: str) -> None:
    with pytest.raises(ConditionSyntaxError, match=None) as caught:
        parse_condition(text, field)
    assert words in str(caught.value)


def test_operators_inside_quotes_are_text() -> None:
    condition = parse_condition("data.s == 'x and y >= z'", "when")
    assert condition.value == "x and y >= z"
