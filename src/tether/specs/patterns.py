"""Regular expressions written in specs — `re:` in a precondition's `expected` and in
`continueOn.output`, a typed parameter's or a form field's `pattern` — compiled and matched by
RE2 (`google-re2`), as Dagu's Go `regexp` does: RE2 syntax, and a match costs time linear in
the text whatever the pattern, so a pattern from a caller cannot hold a worker for minutes by
backtracking. RE2 refuses what it cannot run in linear time (backreferences, lookaround);
such a pattern is refused when the spec is loaded, naming the field and line.

As in Go, `\\d`, `\\w` and `\\s` are ASCII classes; `(?i)`, `(?m)`, `(?s)` set flags.
"""

from __future__ import annotations

import functools
from typing import Any, Final

import re2

_OPTIONS: Final = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is our caller's error, not a log line


class PatternError(ValueError):
    """RE2 cannot compile the pattern; `.reason` says why."""

    def __init__(self, pattern: str, reason: str) -> None:
        self.pattern = pattern
        self.reason = reason
        super().__init__(f"not a valid regular expression (RE2 syntax): {reason}")


@functools.lru_cache(maxsize=512)
def compiled(pattern: str) -> Any:
    """The compiled pattern (cached: conditions are matched on every run).

    Raises:
        PatternError: RE2 cannot compile it.
    """
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        raise PatternError(pattern, _reason(exc)) from None


def check(pattern: str) -> str | None:
    """Why RE2 cannot compile `pattern`, else None."""
    try:
        compiled(pattern)
    except PatternError as exc:
        return exc.reason
    return None


def search(pattern: str, text: str, *, multiline: bool = False) -> bool:
    """Whether `pattern` matches anywhere in `text`; `multiline`: `^` and `$` match at each
    line's ends.

    Raises:
        PatternError: RE2 cannot compile it.
    """
    return compiled(f"(?m){pattern}" if multiline else pattern).search(text) is not None


def _reason(exc: Exception) -> str:
    detail = exc.args[0] if exc.args else exc
    return detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
