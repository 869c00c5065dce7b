"""Command substitutions written in DAG text (pure functions).

A parameter default or an `env` value may hold backtick commands (`BACKTICK_COMMAND`); a
comparison's condition and a parameter's `eval` may also hold `$(…)` (`pieces`). Only such a
command's own text is ever handed to a shell: the text around it is expanded without one
(`substitute.expand_plain`), so whatever else it holds (`${X@P}`, `$((…))`, a value put in by a
reference) is never read by a shell.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

BACKTICK_COMMAND: Final = re.compile(r"`([^`]+)`")  # Dagu's command substitution in params, env
_ESCAPED: Final = frozenset("$`\\")  # a backslash before one of these keeps it plain


@dataclass(frozen=True)
class Piece:
    """A run of plain text, or a command substitution's own text (without `` ` `` / `$(…)`)."""

    text: str
    command: bool = False


def pieces(text: str) -> tuple[Piece, ...]:
    """`text` cut into plain text and the command substitutions written in it: `` `…` `` (to
    the next backtick) and `$(…)` (to its own closing parenthesis, past quoted text and
    nested parentheses). A backslash before `$`, a backtick or a backslash keeps that
    character plain; `$((…))` is arithmetic, not a command; an unclosed one stays plain."""
    out: list[Piece] = []
    plain: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "\\" and text[i + 1 : i + 2] in _ESCAPED:
            plain.append(text[i : i + 2])
            i += 2
            continue
        found = _command_at(text, i)
        if found is None:
            plain.append(text[i])
            i += 1
            continue
        body, i = found
        if plain:
            out.append(Piece("".join(plain)))
            plain = []
        out.append(Piece(body, command=True))
    if plain:
        out.append(Piece("".join(plain)))
    return tuple(out)


def has_command(text: str) -> bool:
    """Whether `text` holds a command substitution (`pieces`)."""
    return any(piece.command for piece in pieces(text))


def _command_at(text: str, i: int) -> tuple[str, int] | None:
    """The command substitution starting at `i`: its own text and the index after it."""
    if text[i] == "`":
        match = BACKTICK_COMMAND.match(text, i)
        return (match[1], match.end()) if match else None
    if text.startswith("$(", i) and not text.startswith("$((", i):
        close = _closing(text, i + 2)
        return (text[i + 2 : close], close + 1) if close is not None else None
    return None


def _closing(text: str, i: int) -> int | None:
    """The index of the `)` that closes a `$(` whose text starts at `i`, else None."""
    depth = 1
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        end: int | None = i
        if char in "'`":
            end = text.find(char, i + 1)
        elif char == '"':
            end = _closing_quote(text, i + 1)
        else:
            depth += (char == "(") - (char == ")")
            if depth == 0:
                return i
        if end is None or end < 0:
            return None
        i = end + 1
    return None


def _closing_quote(text: str, i: int) -> int | None:
    """The index of the `"` that closes a double-quoted string starting at `i`, else None."""
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == '"':
            return i
        end: int | None = i
        if text.startswith("$(", i):
            end = _closing(text, i + 2)
        elif char == "`":
            end = text.find("`", i + 1)
        if end is None or end < 0:
            return None
        i = end + 1
    return None
