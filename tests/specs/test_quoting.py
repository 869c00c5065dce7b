"""How a POSIX shell reads each `$` of a command or script (pure), and the references
`bind_references` leaves to it: POSIX quoting rules, and Dagu's choice of leaving `${NAME}`
between single quotes as written."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether.specs.dag.quoting import EXPANDS, SINGLE_QUOTED, dollar_quoting
from tether.specs.dag.substitute import BOUND_PREFIX, bind_references

#: Each text, and how the shell reads each of its `$` in turn: E expands, S between single
#: quotes, - as a character.
QUOTING = [
    ("echo $A ${B}", "EE"),
    ("echo '$A' \"$B\" \\$C", "SE-"),  # after a backslash: a character
    ("echo $'$A' \"$'\"", "--E"),  # `$'…'` is read as written; between "…" it is not one
    ("echo \"'$A'\"", "E"),  # a single quote between double quotes quotes nothing
    ("echo $(echo '$A' \"$B\")", "ESE"),
    ("echo \"$(echo '$A')\"", "ES"),  # a command substitution quotes afresh
    ("echo `echo \\$A '$B'`", "ES"),  # in a backtick command, `\$` expands
    ("echo ${X:-'$A'} \"${X:-'$B'}\"", "ESEE"),
    ("echo $((1 << $A))\n$B", "EEE"),  # a shift, not a here-document
    ("a # $A\nb$B", "-E"),  # a comment
    ("a#$A", "E"),  # not a comment: `#` inside a word
    ("cat <<E\n$A '$B'\nE\necho $C", "EEE"),
    ("cat <<'E'\n$A\nE\necho $B", "-E"),  # a quoted delimiter: the body is as written
    ('cat <<-"E" <<F\n\t$A\n\tE\n$B\nF\n$C', "-EE"),
    ("cat <<\\E\n$A\nE", "-"),
    ("cat <<<$A", "E"),  # a here-string expands
    ("echo 'open $A", "S"),  # unclosed: quoted to the end
]
_KINDS = {"E": EXPANDS, "S": SINGLE_QUOTED}


@pytest.mark.parametrize(("text", "kinds"), QUOTING)
def test_dollar_quoting_reads_text_as_a_posix_shell_does(text: str, kinds: str) -> None:
    dollars = [i for i, char in enumerate(text) if char == "$"]
    expected = {i: _KINDS[k] for i, k in zip(dollars, kinds, strict=True) if k != "-"}
    assert dollar_quoting(text) == expected


@given(st.text(alphabet="$'\"`\\(){}#<-\n ;aE"))
def test_dollar_quoting_names_only_dollars(text: str) -> None:
    assert set(dollar_quoting(text)) <= {i for i, char in enumerate(text) if char == "$"}


SCOPE = {"A": "va", "J": json.dumps({"k": "vj"})}
OUTPUTS = {"s": {"f": "vs"}}


def test_references_the_shell_expands_read_its_environment() -> None:
    """`${NAME}` stays for the shell; `$1`, `${NAME.path}`, `${params.NAME}` and
    `${steps.ID.outputs.F}` become variables of their own, one per reference text."""
    text, bound = bind_references(
        'echo ${A} "${J.k}" ${J.k} $1 ${1} ${params.A} ${steps.s.outputs.f} ${NOPE} ${2}',
        SCOPE,
        OUTPUTS,
        positional=["p1"],
    )
    j, one, two, a, f = (f"${{{BOUND_PREFIX}{n}}}" for n in range(5))
    assert text == f'echo ${{A}} "{j}" {j} {one} {two} {a} {f} ${{NOPE}} ${{2}}'
    assert list(bound.values()) == ["vj", "p1", "p1", "va", "vs"]


def test_references_between_single_quotes_stay_unless_only_tether_reads_them() -> None:
    """Between single quotes `${NAME}` and `$1` stay as written (Dagu leaves them so, and the
    shell prints them as written); a reference only Tether reads is put in by closing the
    quotes around a variable of its own (Dagu puts its value there)."""
    text, bound = bind_references(
        "awk '{print $1}' '${A}' 'x ${J.k} y'", SCOPE, OUTPUTS, positional=["p1"]
    )
    assert text == f"awk '{{print $1}}' '${{A}}' 'x '\"${{{BOUND_PREFIX}0}}\"' y'"
    assert bound == {f"{BOUND_PREFIX}0": "vj"}


def test_references_the_shell_reads_as_text_stay_as_written() -> None:
    text = "echo \\${J.k} $'${J.k}' # ${J.k}\ncat <<'E'\n${J.k}\nE"
    assert bind_references(text, SCOPE, OUTPUTS, positional=[]) == (text, {})


REFERENCE_TEXT = st.lists(
    st.sampled_from(
        [
            *("${A}", "${J.k}", "$1", "${1}", "${params.A}", "${steps.s.outputs.f}"),
            *("'", '"', "`", "\\", "$(", ")", "${X:-", "}", "$'", "# ", " ", "\n"),
            *("<<E\n", "<<'E'\n", "\nE\n"),
        ]
    )
).map("".join)


@given(REFERENCE_TEXT, st.text(), st.text())
def test_no_value_is_ever_put_into_the_text(text: str, one: str, other: str) -> None:
    """Whatever the text and the values, the text a shell gets is the same: a value only
    ever reaches it through its environment (our choice)."""

    def bind(value: str) -> tuple[str, list[str]]:
        scope = {"A": value, "J": json.dumps({"k": value})}
        got, bound = bind_references(text, scope, {"s": {"f": value}}, positional=[value])
        return got, list(bound)

    assert bind(one) == bind(other)
