"""Settings written in JSON (remotes, profiles, notification channels): the JSON text itself,
starting with `{`, or the path of a file that holds it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def read(
    value: str,
    parse: Callable[[str | bytes], T],
    empty: T,
    what: str,
    error: type[ValueError] = ValueError,
) -> T:
    """What `parse` reads from `value`: JSON text (starting with `{`), or the JSON file it
    names; `empty` for empty text. Raises what `parse` raises, and `error` for a file that
    cannot be read (its message calls it a `what` file and never repeats `value`, which may be
    a mistyped secret)."""
    text = value.strip()
    if not text:
        return empty
    if text.startswith("{"):
        return parse(text)
    try:
        return parse(Path(text).read_bytes())
    except OSError as exc:
        raise error(f"cannot read it as a {what} file: {exc.strerror}") from None
