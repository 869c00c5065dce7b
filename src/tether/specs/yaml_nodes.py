"""Located YAML: PyYAML composer nodes read field by field, every refusal carrying file + line.

Shared by the spec dialects (`specs.dag`, `specs.realm`). Each subclasses `At` to name its own
error classes, and wraps `compose` with its own YAML loader and wording. `Fields` wraps one
mapping node: callers `take` the keys they know (with their accepted spellings); `finish`
refuses whatever is left, so no key is ever silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import ClassVar, Generic, NoReturn, Self, TypeVar

import yaml

from tether.specs.errors import LocatedSpecError

# Tags are fixed at compose time (by the dialect's loader); constructing is the same for both.
_CONSTRUCTOR = yaml.SafeLoader("")
STR = "tag:yaml.org,2002:str"
INT = "tag:yaml.org,2002:int"
FLOAT = "tag:yaml.org,2002:float"
BOOL = "tag:yaml.org,2002:bool"
NULL = "tag:yaml.org,2002:null"


@dataclass(frozen=True)
class At:
    """A node's place: the file, its 1-based line, and the dotted path of the field.

    A dialect subclasses it to set `invalid` (the default refusal) and `unknown` (a field no
    one took); `child` keeps the subclass.
    """

    invalid: ClassVar[type[LocatedSpecError]]
    unknown: ClassVar[type[LocatedSpecError]]

    file: str
    line: int
    path: str
    field: str

    def child(self, node: yaml.Node, field: str, *, index: int | None = None) -> Self:
        path = f"{self.path}[{index}]" if index is not None else _join(self.path, field)
        return type(self)(self.file, node.start_mark.line + 1, path, field)

    def fail(self, reason: str, kind: type[LocatedSpecError] | None = None) -> NoReturn:
        error = kind or self.invalid
        raise error(reason, field=self.field, path=self.path, file=self.file, line=self.line)


A = TypeVar("A", bound=At)


def _join(path: str, field: str) -> str:
    return f"{path}.{field}" if path else field


def compose(
    text: str,
    file: str,
    *,
    loader: type[yaml.SafeLoader],
    error: type[LocatedSpecError],
    what: str,
) -> yaml.MappingNode:
    """The single YAML document in `text` as a mapping node, read with `loader`.

    Raises:
        error: not YAML, several documents, or not a mapping (`what` names the document).
    """
    try:
        docs = list(yaml.compose_all(text, Loader=loader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        raise error(f"not valid YAML: {exc}", field="", path="", file=file, line=line) from exc
    if len(docs) != 1 or not isinstance(docs[0], yaml.MappingNode):
        line = docs[1].start_mark.line + 1 if len(docs) > 1 else 1
        why = "several YAML documents (`---`) are not supported" if len(docs) > 1 else ""
        raise error(
            why or f"{what} must be one YAML mapping", field="", path="", file=file, line=line
        )
    return docs[0]


class Fields(Generic[A]):
    """The keys of one YAML mapping, consumed by name; leftovers are refused by `finish`."""

    def __init__(self, node: yaml.Node, at: A) -> None:
        if not isinstance(node, yaml.MappingNode):
            at.fail("must be a mapping")
        self.at = at
        self._items: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == NULL:
                at.child(key, "?").fail("mapping keys must be strings")
            if key.value in self._items:
                at.child(key, key.value).fail(f"duplicate key {key.value!r}")
            self._items[key.value] = (key, value)

    def take(self, *spellings: str) -> tuple[yaml.Node, A] | None:
        """The value of the first spelling present, and its place; two spellings is an error."""
        found = [s for s in spellings if s in self._items]
        if len(found) > 1:
            key, _ = self._items[found[1]]
            self.at.child(key, found[1]).fail(f"{found[0]!r} and {found[1]!r} are the same field")
        if not found:
            return None
        key, value = self._items.pop(found[0])
        return value, self.at.child(key, found[0])

    def has(self, *spellings: str) -> bool:
        return any(s in self._items for s in spellings)

    def peek(self, key: str) -> yaml.Node | None:
        """The value of `key` without taking it."""
        item = self._items.get(key)
        return item[1] if item else None

    def remaining(self) -> Iterator[str]:
        return iter(list(self._items))

    def drain(self, keep: Callable[[str], bool] = lambda _: True) -> list[tuple[str, yaml.Node, A]]:
        """Take every remaining key that `keep` accepts, in file order: (name, value, place)."""
        out = []
        for name in [n for n in self._items if keep(n)]:
            key, value = self._items.pop(name)
            out.append((name, value, self.at.child(key, name)))
        return out

    def finish(self, hint: dict[str, str] | None = None) -> None:
        """Refuse the first key nobody took, naming it and its line."""
        for name, (key, _) in self._items.items():
            extra = (hint or {}).get(name)
            reason = f"field {name!r} is not supported" + (f" ({extra})" if extra else "")
            self.at.child(key, name).fail(reason, self.at.unknown)


def plain(node: yaml.Node) -> object:
    """The node as plain Python data (str, int, float, bool, None, list, dict)."""
    return _CONSTRUCTOR.construct_object(node, deep=True)


def string(node: yaml.Node, at: At, *, allow_scalars: bool = False) -> str:
    """A string; with `allow_scalars`, numbers and booleans become their YAML text."""
    if isinstance(node, yaml.ScalarNode):
        if node.tag == STR:
            return str(node.value)
        if allow_scalars and node.tag in (INT, FLOAT, BOOL):
            return str(node.value)
    return at.fail("must be a string")


def nonblank(node: yaml.Node, at: At, *, allow_scalars: bool = False) -> str:
    text = string(node, at, allow_scalars=allow_scalars)
    if not text.strip():
        at.fail("must not be blank")
    return text


def integer(node: yaml.Node, at: At, *, minimum: int | None = None, digits: bool = False) -> int:
    """An integer; with `digits`, a string of decimal digits is accepted too (Dagu allows it)."""
    value: object = None
    if isinstance(node, yaml.ScalarNode) and node.tag == INT:
        value = plain(node)
    elif digits and isinstance(node, yaml.ScalarNode) and node.tag == STR:
        text = str(node.value).strip()
        if text.lstrip("-").isdigit():
            value = int(text)
    if not isinstance(value, int) or isinstance(value, bool):
        at.fail("must be an integer")
    if minimum is not None and value < minimum:
        at.fail(f"must be at least {minimum}")
    return value


def boolean(node: yaml.Node, at: At) -> bool:
    if isinstance(node, yaml.ScalarNode) and node.tag == BOOL:
        return bool(plain(node))
    return at.fail("must be true or false")


def items(node: yaml.Node, at: A) -> list[tuple[yaml.Node, A]]:
    """The elements of a sequence, each with its own place (`path[i]`)."""
    if not isinstance(node, yaml.SequenceNode):
        at.fail("must be a list")
    return [(item, at.child(item, at.field, index=i)) for i, item in enumerate(node.value)]


def strings(node: yaml.Node, at: At, *, allow_scalars: bool = False) -> tuple[str, ...]:
    """A string or a list of strings, as a tuple."""
    if isinstance(node, yaml.SequenceNode):
        return tuple(string(n, a, allow_scalars=allow_scalars) for n, a in items(node, at))
    return (string(node, at, allow_scalars=allow_scalars),)


def is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == NULL
