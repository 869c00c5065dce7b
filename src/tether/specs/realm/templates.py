"""Realm's template expressions, `{{ path | filter: arg | … }}`, rendered (pure).

Paths start at `run.params.` or `context.resources.<step>.` (a number selects a list item);
`workflow.context.` is outside the subset and never resolves. A string is inserted unchanged;
every other value is written as JSON, lists and maps indented by two spaces.

- `render(text, params, outputs)`: a step's `prompt` (lenient): an expression whose path finds
  nothing, whose filter is unknown, or whose filter does not apply is left as written.
- `render_strict(text, params, outputs)`: a gate's `message`: a path that finds nothing raises
  `Unresolvable` (`GATE_MESSAGE_UNRESOLVABLE`), an unknown filter `UnknownFilter`
  (`FILTER_UNKNOWN`); a filter that does not apply leaves the expression as written.

`{% … %}` blocks are not read (they are Realm's `workflow_context` loops, outside the subset).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

_EXPR: Final = re.compile(r"\{\{\s*(.*?)\s*\}\}")
_ARG: Final = re.compile(r'\s*("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|[^,]+)\s*(?:,|$)')
_MISSING: Final = object()


class Unresolvable(Exception):
    """A gate message names a path that finds nothing."""


class UnknownFilter(Exception):
    """A gate message uses a filter that does not exist."""


class _NotApplicable(Exception):
    """A filter met a value of a type it cannot handle (the expression stays as written)."""


def render(text: str, params: Mapping[str, Any], outputs: Mapping[str, Any]) -> str:
    """A prompt: each expression rendered, or left as written when it cannot be."""

    def one(match: re.Match[str]) -> str:
        try:
            return _write(_evaluate(match.group(1), params, outputs))
        except (Unresolvable, UnknownFilter, _NotApplicable):
            return match.group(0)

    return _EXPR.sub(one, text)


def render_strict(text: str, params: Mapping[str, Any], outputs: Mapping[str, Any]) -> str:
    """A gate message. Raises Unresolvable, UnknownFilter."""

    def one(match: re.Match[str]) -> str:
        try:
            return _write(_evaluate(match.group(1), params, outputs))
        except _NotApplicable:
            return match.group(0)

    return _EXPR.sub(one, text)


def resolve_input_map(
    node: Mapping[str, Any], params: Mapping[str, Any], outputs: Mapping[str, Any]
) -> dict[str, Any]:
    """An auto step's input from its `input_map`: a path's value (a key whose path resolves to
    nothing is dropped), a nested map built the same way, `{$literal: v}` as written."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if isinstance(value, Mapping) and "$literal" in value:
            out[key] = value["$literal"]
        elif isinstance(value, Mapping):
            out[key] = resolve_input_map(value, params, outputs)
        elif isinstance(value, str):
            found = _resolve(value.strip(), params, outputs)
            if found is not _MISSING:
                out[key] = found
    return out


def _evaluate(expr: str, params: Mapping[str, Any], outputs: Mapping[str, Any]) -> Any:
    path, *filters = [part.strip() for part in _split_pipes(expr)]
    value = _resolve(path, params, outputs)
    for item in filters:
        name, _, raw = item.partition(":")
        fn = FILTERS.get(name.strip())
        if fn is None:
            raise UnknownFilter(f"gate.message uses a filter that does not exist: '{name.strip()}'")
        args = [_unquote(a) for a in _ARG.findall(raw)] if raw.strip() else []
        if value is _MISSING and name.strip() != "default":
            break
        value = fn(value, *args)
    if value is _MISSING:
        raise Unresolvable(f"gate.message refers to something the run does not have: {path}")
    return value


def _split_pipes(expr: str) -> list[str]:
    parts, current, quote = [], "", ""
    for ch in expr:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "|":
            parts.append(current)
            current = ""
            continue
        current += ch
    return [*parts, current]


def _unquote(arg: str) -> str:
    arg = arg.strip()
    if len(arg) >= 2 and arg[0] == arg[-1] and arg[0] in "\"'":
        return arg[1:-1]
    return arg


def _resolve(path: str, params: Mapping[str, Any], outputs: Mapping[str, Any]) -> Any:
    keys = path.split(".")
    if keys[:2] == ["run", "params"]:
        value: Any = params
        keys = keys[2:]
    elif keys[:2] == ["context", "resources"] and len(keys) > 2:
        value = outputs
        keys = keys[2:]
    else:
        return _MISSING
    for key in keys:
        if isinstance(value, Mapping) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return _MISSING
    return value


def _write(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, dict)):
        return json.dumps(value, indent=2, ensure_ascii=False)
    return json.dumps(value)


# --- filters: each raises _NotApplicable on a value of a type it cannot handle -------------------


def _text(v: Any) -> str:
    if not isinstance(v, str):
        raise _NotApplicable
    return v


def _items(v: Any, nonempty: bool = False) -> list[Any]:
    if not isinstance(v, list) or (nonempty and not v):
        raise _NotApplicable
    return v


def _num(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _NotApplicable
    return v


def _int_arg(arg: str | None, default: int = 0) -> int:
    try:
        return int(arg) if arg is not None else default
    except ValueError:
        raise _NotApplicable from None


def _round(v: Any, places: str | None = None) -> Any:
    out = round(_num(v), _int_arg(places))
    return int(out) if _int_arg(places) == 0 else out


def _truncate(v: Any, n: str | None = None) -> str:
    """At most `n` characters, cut at a word boundary, with `…`."""
    text, limit = _text(v), _int_arg(n, 50)
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 1, 0)]
    if not text[len(cut)].isspace() and " " in cut:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip() + "…"


def _and_join(v: Any) -> str:
    items = [_write(i) for i in _items(v, nonempty=True)]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _flatten(v: Any) -> list[Any]:
    out: list[Any] = []
    for item in _items(v):
        out.extend(_flatten(item) if isinstance(item, list) else [item])
    return out


def _duration(v: Any) -> str:
    seconds = int(_num(v) // 1000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h"] if hours else []
    parts += [f"{minutes}m"] if minutes or hours else []
    return " ".join([*parts, f"{secs}s"])


def _yesno(v: Any, yes: str = "yes", no: str = "no") -> str:
    if not isinstance(v, bool):
        raise _NotApplicable
    return yes if v else no


_DATES: Final = {
    "short": "%b %d, %Y",
    "long": "%B %d, %Y",
    "iso": "%Y-%m-%d",
    "time": "%H:%M",
    "datetime": "%b %d, %Y, %H:%M",
}


def _date(v: Any, form: str = "short") -> str:
    try:
        when = datetime.fromisoformat(_text(v)).astimezone(UTC)
        out = when.strftime(_DATES[form])
    except (ValueError, KeyError):
        raise _NotApplicable from None
    return out.replace(" 0", " ", 1) if form in ("short", "long", "datetime") else out


_SPANS: Final = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


def _from_now(v: Any) -> str:
    """`246 days ago`, `in 3 hours`: the largest whole unit up to days (UTC, ISO 8601 text)."""
    try:
        when = datetime.fromisoformat(_text(v)).astimezone(UTC)
    except ValueError:
        raise _NotApplicable from None
    gap = int((when - datetime.now(UTC)).total_seconds())
    unit, size = next(((u, n) for u, n in _SPANS if abs(gap) >= n), ("second", 1))
    count = abs(gap) // size
    said = f"{count} {unit}{'' if count == 1 else 's'}"
    return f"in {said}" if gap > 0 else f"{said} ago"


def _unique(v: Any) -> list[Any]:
    out: list[Any] = []
    for item in _items(v):
        if item not in out:
            out.append(item)
    return out


def _sort(v: Any) -> list[Any]:
    try:
        return sorted(_items(v))
    except TypeError:
        raise _NotApplicable from None


FILTERS: Final[Mapping[str, Callable[..., Any]]] = {
    "bullets": lambda v: "\n".join(f"• {_write(i)}" for i in _items(v, nonempty=True)),
    "join": lambda v, sep=", ": sep.join(_write(i) for i in _items(v)),
    "default": lambda v, d="": d if v is _MISSING or v is None else v,
    "upper": lambda v: _text(v).upper(),
    "lower": lambda v: _text(v).lower(),
    "capitalize": lambda v: _text(v)[:1].upper() + _text(v)[1:],
    "truncate": _truncate,
    "pluck": lambda v, k: [i.get(k) for i in _items(v) if isinstance(i, Mapping)],
    "count": lambda v: len(_items(v)),
    "limit": lambda v, n: _items(v)[: _int_arg(n)],
    "compact": lambda v: [i for i in _items(v) if i not in (None, "")],
    "round": _round,
    "floor": lambda v: math.floor(_num(v)),
    "ceil": lambda v: math.ceil(_num(v)),
    "abs": lambda v: abs(_num(v)),
    "number_format": lambda v, p=None: f"{_num(v):,.{_int_arg(p)}f}",
    "percent": lambda v, p=None: f"{_num(v) * 100:.{_int_arg(p)}f}%",
    "replace": lambda v, a, b="": _text(v).replace(a, b),
    "yesno": _yesno,
    "and_join": _and_join,
    "trim": lambda v: _text(v).strip(),
    "first": lambda v: _items(v, nonempty=True)[0],
    "last": lambda v: _items(v, nonempty=True)[-1],
    "sum": lambda v: sum(_num(i) for i in _items(v)),
    "flatten": _flatten,
    "split": lambda v, sep: _text(v).split(sep),
    "sort": _sort,
    "unique": _unique,
    "title": lambda v: _text(v).title(),
    "code": lambda v: re.sub(r"\W+", "_", _text(v)).strip("_").upper(),
    "indent": lambda v, n="2": "\n".join(" " * _int_arg(n) + line for line in _text(v).split("\n")),
    "duration": _duration,
    "date": _date,
    "from_now": _from_now,
}
