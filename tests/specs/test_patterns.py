"""Regexes written in DAG specs are RE2's (`specs.patterns`): a pattern that makes a
backtracking engine run for minutes matches in linear time, and a pattern RE2 cannot run is
refused when the spec is loaded, naming its field and line."""

from __future__ import annotations

import pytest

from tether.runtime.dag.state import DagState
from tether.specs import patterns
from tether.specs.dag import InvalidValue, load_string
from tether.specs.scalar_forms import value_errors

# (a+)+ against a's ending in "b": a backtracking engine tries 2^n ways to split the a's
# before it gives up (2^40 here: hours); RE2 reads the text once.
EVIL = "^(a+)+$"
TEXT = "a" * 40 + "b"
S = "steps:\n  - name: s\n    run: act\n"


def test_a_backtracking_pattern_in_a_form_is_matched_in_linear_time() -> None:
    """Our choice (as Go's regexp does for Dagu): a form field's `pattern` is RE2's."""
    prop = {"type": "string", "pattern": EVIL}
    assert value_errors(prop, TEXT) == [f"must match {EVIL!r}"]
    assert value_errors(prop, "aaaa") == []


def test_a_backtracking_continue_on_output_pattern_is_matched_in_linear_time() -> None:
    """Our choice: continueOn's `re:` output patterns are RE2's, still matched per line."""
    dag = load_string(
        f"name: x\nsteps:\n  - name: s\n    run: act\n    continueOn: {{output: ['re:{EVIL}']}}\n"
    )
    state = DagState(dag)
    state.record_work("s", {"status": "failed", "stdout": TEXT, "stderr": "", "exit_code": 1})
    assert not state.nodes["s"].continued
    state = DagState(dag)
    state.record_work("s", {"status": "failed", "stdout": f"{TEXT}\naa", "exit_code": 1})
    assert state.nodes["s"].continued  # `$` ends a line: the second line matches


@pytest.mark.parametrize(
    ("spec", "field", "line"),
    [
        ("preconditions:\n  - condition: x\n    expected: 're:(a)\\1'\n" + S, "expected", 3),
        ("preconditions:\n  - condition: x\n    expected: 're:(^ok$'\n" + S, "expected", 3),
        (S + "    continueOn:\n      output: [plain, 're:(?=x)']\n", "output", 5),
        ("params:\n  - name: N\n    type: string\n    pattern: '(?<=a)b'\n" + S, "pattern", 4),
        (
            "steps:\n  - id: t\n    action: human.task\n    with:\n      prompt: p\n"
            "      form:\n        type: object\n        properties:\n"
            "          f: {type: string, pattern: 'a++'}\n",
            "pattern",
            9,
        ),
    ],
    ids=["backreference", "anchored", "lookahead", "lookbehind", "possessive"],
)
def test_a_pattern_re2_cannot_compile_is_refused_at_load_naming_field_and_line(
    spec: str, field: str, line: int
) -> None:
    """Our choice: refused when the spec is loaded (a `$` that ends a regex no longer hides
    it as a reference), never when a run reaches it."""
    with pytest.raises(InvalidValue) as caught:
        load_string(spec, default_name="x")
    assert (caught.value.field, caught.value.line) == (field, line)
    assert "RE2" in caught.value.reason


def test_a_pattern_with_a_reference_is_compiled_when_it_runs() -> None:
    """`${…}` is put in when the step runs, so such a pattern cannot be checked before."""
    spec = "preconditions:\n  - condition: x\n    expected: 're:(${P}'\n" + S
    assert load_string(spec, default_name="x").steps[0].name == "s"
    with pytest.raises(patterns.PatternError):
        patterns.search("(", "x")


def test_classes_are_ascii_as_in_go() -> None:
    """Dagu's Go regexp: `\\d` and `\\w` are ASCII; flags are written inline."""
    assert not patterns.search(r"\d", "٣") and patterns.search(r"\d", "3")
    assert patterns.search("(?i)OK", "ok") and patterns.search("é", "café")
