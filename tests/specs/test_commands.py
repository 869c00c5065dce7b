"""Command substitutions in DAG text, and the expansion around them (pure): only a command's
own text is meant for a shell; the rest, and every value, is read without one (our choice,
after Dagu v2's dynamic evaluation: references first, then each `` `…` `` / `$(…)`)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether.specs.dag.commands import Piece, has_command, pieces
from tether.specs.dag.substitute import BOUND_PREFIX, bind_references, expand_plain

PIECES = [
    ("plain", (Piece("plain"),)),
    ("a $(echo x) b", (Piece("a "), Piece("echo x", True), Piece(" b"))),
    ("x `date` y", (Piece("x "), Piece("date", True), Piece(" y"))),
    ('$(basename "$PWD")', (Piece('basename "$PWD"', True),)),
    ("$(echo \")\" ')')", (Piece("echo \")\" ')'", True),)),  # quoted parentheses
    ("$(echo $(echo a) (b))", (Piece("echo $(echo a) (b)", True),)),  # nested
    ('$(echo "$(echo ")")")', (Piece('echo "$(echo ")")"', True),)),
    ("$((1 + 2))", (Piece("$((1 + 2))"),)),  # arithmetic, not a command
    ("\\$(no) \\`no\\`", (Piece("\\$(no) \\`no\\`"),)),  # escaped
    ("$(unclosed `also", (Piece("$(unclosed `also"),)),
    ("``", (Piece("``"),)),
    ("${X@P} ${A:N} $[N]", (Piece("${X@P} ${A:N} $[N]"),)),
]


@pytest.mark.parametrize(("text", "expected"), PIECES)
def test_pieces_finds_the_command_substitutions_written_in_text(
    text: str, expected: tuple[Piece, ...]
) -> None:
    assert pieces(text) == expected
    assert has_command(text) is any(p.command for p in expected)


@given(st.text(alphabet=st.characters(blacklist_characters="`$")))
def test_text_without_a_backtick_or_dollar_is_one_plain_piece(text: str) -> None:
    assert pieces(text) == ((Piece(text),) if text else ())


SCOPE = {"A": "va", "HOME": "/h", "J": json.dumps({"k": [1, 2]})}


def test_plain_text_reads_references_and_names_as_a_shell_would() -> None:
    """References and `$NAME` are put in, a missing one as empty; escapes give the
    character; the forms only a shell expands stay as written."""
    text = "${A} $A $HOME ${J.k[1]} $1 ${2} ${NOPE} $NOPE \\$A \\\\ ${X@P} $((N)) $$ $[N] ${!N}"
    got = expand_plain(text, SCOPE, ["p1"])
    assert got == "va va /h 2 p1    $A \\ ${X@P} $((N)) $$ $[N] ${!N}"


@given(st.text())
def test_a_value_put_into_plain_text_comes_out_as_written(value: str) -> None:
    assert expand_plain("<${A}|$A|${1}>", {"A": value}, [value]) == f"<{value}|{value}|{value}>"


@given(st.text(), st.text())
def test_a_commands_references_never_put_a_value_into_its_text(left: str, right: str) -> None:
    """In a command's text, `${NAME}` and `$1` stay for the shell to read from its
    environment and arguments; any other reference becomes a bound variable."""
    scope = {"A": left, "J": json.dumps({"k": right})}
    outputs = {"s": {"f": right}}
    command = "echo ${A} $A $1 ${2} ${J.k} ${params.A} ${steps.s.outputs.f} ${NOPE.x}"
    text, bound = bind_references(command, scope, outputs)
    names = [f"{BOUND_PREFIX}{n}" for n in range(3)]
    refs = " ".join("${" + name + "}" for name in names)
    assert text == f"echo ${{A}} $A $1 ${{2}} {refs} ${{NOPE.x}}"
    assert bound == dict(zip(names, [right, left, right], strict=True))
