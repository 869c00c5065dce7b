"""Pure helpers the runtime uses: substitution, parameter binding, scope, graph queries, retry."""

from __future__ import annotations

from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether.specs.dag import (
    EnvVar,
    Param,
    RetryPolicy,
    bind_params,
    cron_of,
    downstream_of,
    evaluate_env,
    load_string,
    output_order,
    parse_label,
    retry_delay,
    step_scope,
    substitute,
    upstream_of,
)
from tether.specs.dag.model import ScalarType
from tether.specs.scalar_forms import SCALAR_TYPES

DIAMOND = load_string(
    "steps:\n"
    "  - {name: a, command: x}\n  - {name: b, command: x, depends: a}\n"
    "  - {name: c, command: x, depends: a}\n  - {name: d, command: x, depends: [c, b]}\n"
    "  - {name: e, command: x}\n",
    default_name="diamond",
)


def test_substitute_names_positions_and_task_outputs() -> None:
    text = "${A} $1 ${2} ${steps.t.outputs.ok} ${MISSING} $NAME $3"
    out = substitute(text, {"A": "x", "NAME": "n"}, ("p1", "p2"), {"t": {"ok": "yes"}})
    assert out == "x p1 p2 yes ${MISSING} $NAME $3"


@given(st.text())
def test_substitute_with_nothing_known_changes_nothing(text: str) -> None:
    """Dagu spec 006: a missing reference is preserved as written."""
    assert substitute(text, {}) == text


@given(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True), st.text(max_size=20))
def test_substitute_replaces_a_known_name(name: str, value: str) -> None:
    assert substitute("<${" + name + "}>", {name: value}) == f"<{value}>"


def test_substitute_reads_json_paths() -> None:
    """Older Dagu's `${NAME.path}` JSON references (README: `${INPUT.name}`); a name that is
    unset, not JSON or without the path stays as written."""
    scope = {"J": '{"name": "John", "age": 30, "f": 1.5, "l": [1, {"a": true}]}', "X": "x"}
    text = "${J.name} ${J.age} ${J.f} ${J.l[1].a} ${J.l} ${J.nope} ${X.y} ${NONE.a} ${X}"
    assert substitute(text, scope) == (
        'John 30 1.5 true [1, {"a": true}] ${J.nope} ${X.y} ${NONE.a} x'
    )


def test_bind_params_overrides_by_name_and_position() -> None:
    declared = (Param(1, None, "a"), Param(2, "N", "n"), Param(3, None, "c"))
    assert bind_params(declared) == (("a", "n", "c"), {"N": "n"})
    assert bind_params(declared, [(None, "A"), (None, "B"), ("N", "m")]) == (
        ("A", "m", "c"),
        {"N": "m"},
    )
    assert bind_params(declared, [(None, "1"), (None, "2"), (None, "3"), (None, "4")]) == (
        ("1", "2", "3", "4"),
        {"N": "2"},
    )
    with pytest.raises(ValueError, match="unknown parameter"):
        bind_params(declared, [("OTHER", "x")])


def test_env_is_evaluated_top_to_bottom_over_params() -> None:
    env = (EnvVar("A", "${P}-1"), EnvVar("B", "${A}-2"), EnvVar("P", "env"))
    assert evaluate_env(env, {"P": "param"}) == {"P": "env", "A": "param-1", "B": "param-1-2"}


def test_step_scope_precedence() -> None:
    """Our reading of Dagu spec 006: process < params < env < profile < outputs < run values."""
    scope = step_scope(
        {"V": "os", "HOME": "/h"},
        {"V": "param", "P": "p"},
        (EnvVar("V", "env"),),
        profile={"V": "profile"},
        outputs=[{"V": "far"}, {"V": "near", "O": "o"}],
        run_values={"DAG_PUSHBACK_ITERATION": "1"},
    )
    assert scope == {"V": "near", "HOME": "/h", "P": "p", "O": "o", "DAG_PUSHBACK_ITERATION": "1"}
    assert step_scope({}, {"V": "param"}, (EnvVar("V", "${V}+env"),))["V"] == "param+env"


def test_graph_queries() -> None:
    assert DIAMOND.order == ("a", "e", "b", "c", "d")
    assert upstream_of(DIAMOND, "d") == {"a", "b", "c"}
    assert downstream_of(DIAMOND, "a") == {"b", "c", "d"}
    assert downstream_of(DIAMOND, "e") == frozenset()
    assert output_order(DIAMOND, "d") == ("c", "b", "a")
    with pytest.raises(KeyError):
        DIAMOND.step("zz")


def test_retry_delay_backoff_and_cap() -> None:
    assert [retry_delay(RetryPolicy(5, 2), n) for n in (1, 2, 3)] == [2.0, 2.0, 2.0]
    policy = RetryPolicy(5, 2, backoff=2.0, max_interval_sec=5)
    assert [retry_delay(policy, n) for n in (1, 2, 3)] == [2.0, 4.0, 5.0]


def test_labels_and_cron_helpers() -> None:
    assert str(parse_label(" Team=ops ")) == "team=ops"
    assert str(parse_label("solo")) == "solo"
    for bad in ("", "a" * 64, "k=-v", "k=" + "v" * 256):
        with pytest.raises(ValueError):
            parse_label(bad)
    assert cron_of("@weekly") == "0 0 * * 0"
    with pytest.raises(ValueError):
        cron_of("* * *")


def test_the_scalar_type_annotation_lists_the_scalar_types_the_loaders_accept() -> None:
    """Our choice: the types a DAG parameter and a form property may declare have one home
    (`scalar_forms.SCALAR_TYPES`); the model's `ScalarType` annotation names the same ones."""
    assert get_args(ScalarType) == SCALAR_TYPES
