"""How a POSIX shell reads each `$` of text written for it (pure functions).

`dollar_quoting` tells, for every `$` in a command or script, whether the shell expands it
(unquoted, between double quotes, in a `$(…)`, a backtick command, `${…}` or `$((…))`, in the
body of a here-document whose delimiter is unquoted), or it stands between plain single quotes;
any other `$` the shell reads as a character (after a backslash, in `$'…'`, in a comment, in the
body of a here-document whose delimiter is quoted). `substitute.bind_references` uses it to
turn a `${…}` reference into one the shell reads from its environment, or to leave it as
written where the shell would not read it.

The reading follows the POSIX grammar closely, not exactly: a `)` of a `case` pattern inside
`$(…)` ends the command substitution here, and an arithmetic `((…))` command is read as
ordinary text. Whatever it gets wrong changes how a reference reads (its value, or its text as
written), never whether a value becomes text the shell parses: no value is put into the text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Literal

Quoting = Literal["expands", "single"]
EXPANDS: Final[Quoting] = "expands"  # the shell expands the `$` here
SINGLE_QUOTED: Final[Quoting] = "single"  # between plain single quotes: read as written

_BREAK: Final = frozenset(" \t\n;&|()<>")  # ends a word, and so a here-document's delimiter
_AFTER_BACKSLASH: Final = frozenset("$`\\")  # what a backslash escapes in a backtick command
# The characters that may change how what follows is read (the rest are skipped at once).
_WORDS_SPECIAL: Final = re.compile(r"[\\'\"`$#<\n()}]")
_DOUBLE_SPECIAL: Final = re.compile(r"[\\\"`$]")


def dollar_quoting(text: str) -> dict[int, Quoting]:
    """The index of each `$` in `text` that the shell expands (`EXPANDS`) or that stands
    between plain single quotes (`SINGLE_QUOTED`); a `$` not listed is read as a character."""
    found: dict[int, Quoting] = {}
    _Reader(text, found, None).words(0, "top")
    return found


class _Reader:
    """One pass over `text` (a backtick command's text is read by a reader of its own, its
    indices mapped back to the text it came from by `origin`)."""

    def __init__(self, text: str, found: dict[int, Quoting], origin: Sequence[int] | None):
        self.text = text
        self.found = found
        self.origin = origin
        self.heredocs: list[tuple[str, bool, bool]] = []  # delimiter, strips tabs, expands

    def mark(self, i: int, how: Quoting) -> None:
        self.found[self.origin[i] if self.origin is not None else i] = how

    def words(self, i: int, mode: str, depth: int = 0, in_double: bool = False) -> int:
        """Read unquoted text from `i`: the whole text (`top`), a `$(…)` (`paren`) or
        `$((…))` (`arith`) to the `)` that closes it (`depth` open), or a `${…}` (`brace`,
        between double quotes when `in_double`) to its `}`. Returns the index after it."""
        text, end = self.text, len(self.text)
        start = i
        while i < end:
            found = _WORDS_SPECIAL.search(text, i)
            if found is None:
                return end
            i = found.start()
            char = text[i]
            if char == "\\":
                i += 2
                continue
            if mode in ("paren", "arith") and char in "()":
                depth += 1 if char == "(" else -1
                if depth == 0:
                    return i + 1
            elif mode == "brace" and char == "}":
                return i + 1
            elif char == "'" and not in_double:
                i = self.single(i + 1)
                continue
            elif char == '"':
                i = self.double(i + 1)
                continue
            elif char == "`":
                i = self.backtick(i + 1, in_double)
                continue
            elif char == "$":
                i = self.dollar(i, in_double)
                continue
            elif mode in ("top", "paren"):
                if char == "#" and (i == start or text[i - 1] in _BREAK):
                    newline = text.find("\n", i)
                    i = end if newline < 0 else newline
                    continue
                if text.startswith("<<<", i):  # a here-string: a word like any other
                    i += 3
                    continue
                if text.startswith("<<", i):
                    i = self.heredoc(i + 2)
                    continue
                if char == "\n" and self.heredocs:
                    i = self.bodies(i + 1)
                    continue
            i += 1
        return end

    def single(self, i: int) -> int:
        """Past the `'` that closes single quotes opened before `i`."""
        close = self.text.find("'", i)
        close = len(self.text) if close < 0 else close
        for j in range(i, close):
            if self.text[j] == "$":
                self.mark(j, SINGLE_QUOTED)
        return close + 1

    def double(self, i: int, end: int | None = None, closes: bool = True) -> int:
        """Past the `"` that closes double quotes opened before `i`; or (`closes` False) a
        here-document's body up to `end`, read as double-quoted text without the quotes."""
        text = self.text
        end = len(text) if end is None else end
        while i < end:
            found = _DOUBLE_SPECIAL.search(text, i, end)
            if found is None:
                return end
            i = found.start()
            char = text[i]
            if char == "\\":
                i += 2
            elif char == '"' and closes:
                return i + 1
            elif char == "$":
                i = self.dollar(i, in_double=True)
            elif char == "`":
                i = self.backtick(i + 1, in_double=True)
            else:
                i += 1
        return end

    def dollar(self, i: int, in_double: bool) -> int:
        """Past the expansion the `$` at `i` starts (or past a `$'…'` string)."""
        text = self.text
        after = text[i + 1 : i + 2]
        if after == "'" and not in_double:
            j = i + 2
            while j < len(text) and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            return j + 1
        self.mark(i, EXPANDS)
        if text.startswith("((", i + 1):
            return self.words(i + 3, "arith", depth=2)
        if after == "(":
            return self.words(i + 2, "paren", depth=1)
        if after == "{":
            return self.words(i + 2, "brace", in_double=in_double)
        return i + 1

    def backtick(self, i: int, in_double: bool) -> int:
        """Past the backtick that closes a command opened before `i`: its text, with the
        backslashes the shell takes away first taken away, read as a script of its own."""
        text = self.text
        chars: list[str] = []
        origin: list[int] = []
        escaped = _AFTER_BACKSLASH | {'"'} if in_double else _AFTER_BACKSLASH
        while i < len(text) and text[i] != "`":
            if text[i] == "\\" and text[i + 1 : i + 2] in escaped:
                i += 1
            chars.append(text[i])
            origin.append(self.origin[i] if self.origin is not None else i)
            i += 1
        _Reader("".join(chars), self.found, origin).words(0, "top")
        return i + 1

    def heredoc(self, i: int) -> int:
        """After a `<<` (or `<<-`): note the here-document its delimiter word opens; its body
        starts at the next line (`bodies`)."""
        text = self.text
        strips = text.startswith("-", i)
        i += strips
        while i < len(text) and text[i] in " \t":
            i += 1
        word: list[str] = []
        quoted = False
        while i < len(text) and text[i] not in _BREAK:
            char = text[i]
            if char == "\\":
                quoted = True
                word.append(text[i + 1 : i + 2])
                i += 2
            elif char in "'\"":
                quoted = True
                close = text.find(char, i + 1)
                close = len(text) if close < 0 else close
                word.append(text[i + 1 : close])
                i = close + 1
            else:
                word.append(char)
                i += 1
        if word or quoted:
            self.heredocs.append(("".join(word), strips, not quoted))
        return i

    def bodies(self, i: int) -> int:
        """Read the bodies of the here-documents opened on the line that ended before `i`;
        returns the index after the last one's delimiter line."""
        pending, self.heredocs = self.heredocs, []
        text = self.text
        for delimiter, strips, expands in pending:
            start = body_end = i
            while i < len(text):
                newline = text.find("\n", i)
                line_end = len(text) if newline < 0 else newline
                line = text[i:line_end]
                body_end, i = i, line_end + 1
                if (line.lstrip("\t") if strips else line) == delimiter:
                    break
            else:
                body_end = len(text)
            if expands:
                self.double(start, body_end, closes=False)
        return min(i, len(text))
