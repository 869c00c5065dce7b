"""Located YAML: PyYAML composer nodes read field by field, every refusal carrying file + line.

Shared by the spec dialects (`specs.dag`, `specs.realm`). Each subclasses `At` to name its own
error classes, and wraps `compose` with its own YAML loader and wording. `Fields` wraps one
mapping node: callers `take` the keys they know (with their accepted spellings); `finish`
refuses whatever is left, so no key is ever silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Generic, NoReturn, Self, TypeVar

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from tether.specs import limits as spec_limits
from tether.specs.errors import LocatedSpecError, SpecLimitExceeded
from tether.specs.limits import SpecLimits

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
    limits: SpecLimits | None = None,
    too_large: type[SpecLimitExceeded] = SpecLimitExceeded,
) -> yaml.MappingNode:
    """The single YAML document in `text` as a mapping node, read with `loader`'s tags.

    With `limits`, the text's size is checked before it is read, and its depth and aliases
    while it is composed (an alias is never expanded to be counted: each node's expanded size
    is known once it is composed), so an oversized document costs no more than its bytes.

    Raises:
        error: not YAML, several documents, or not a mapping (`what` names the document).
        too_large: over one of `limits` (the refusal names the setting and its value).
    """
    if limits is not None:
        check_size(text, file, limits, too_large)
    try:
        docs = compose_documents(text, file, loader=loader, limits=limits, too_large=too_large)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        raise error(f"not valid YAML: {exc}", field="", path="", file=file, line=line) from exc
    except RecursionError:
        # The composer recurses once per level of nesting: without a depth limit, a document
        # nested past what the interpreter's stack holds is refused, never a failure.
        raise error("nested too deeply", field="", path="", file=file, line=1) from None
    except UnicodeEncodeError as exc:  # a lone surrogate (JSON lets a caller send one)
        line = text.count("\n", 0, exc.start) + 1
        raise error(
            "not valid YAML: the text holds a lone surrogate", field="", path="", file=file,
            line=line,
        ) from exc  # fmt: skip
    if len(docs) != 1 or not isinstance(docs[0], yaml.MappingNode):
        line = docs[1].start_mark.line + 1 if len(docs) > 1 else 1
        why = "several YAML documents (`---`) are not supported" if len(docs) > 1 else ""
        raise error(
            why or f"{what} must be one YAML mapping", field="", path="", file=file, line=line
        )
    return docs[0]


def check_size(
    text: str, file: str, limits: SpecLimits, too_large: type[SpecLimitExceeded] = SpecLimitExceeded
) -> None:
    """Refuse `text` over `limits.max_bytes`, as `compose` does first. Nothing is read: the
    check is linear in the text at worst, and constant for a text with more characters than
    the limit allows bytes.

    Raises:
        too_large: naming the setting and its value.
    """
    if why := spec_limits.over_bytes(text, limits):
        raise too_large(
            why,
            setting=spec_limits.MAX_BYTES_SETTING,
            maximum=limits.max_bytes,
            file=file,
            line=1,
        )


def compose_documents(
    text: str,
    file: str,
    *,
    loader: type[yaml.SafeLoader],
    limits: SpecLimits | None = None,
    too_large: type[SpecLimitExceeded] = SpecLimitExceeded,
) -> list[yaml.Node]:
    """Every YAML document in `text`, composed as `compose` does (the same limits).

    Raises:
        yaml.YAMLError, UnicodeEncodeError: not YAML. too_large: over one of `limits`.
    """
    return _compose_all(_loader_class(loader)(text, limits, too_large, file))


def _compose_all(reader: _BoundedComposer) -> list[yaml.Node]:
    try:
        docs = []
        while reader.check_node():
            node = reader.get_node()
            if node is not None:
                docs.append(node)
        return docs
    finally:
        reader.dispose()


class _BoundedComposer(Composer):
    """PyYAML's composer over libyaml's parser (its events come several times faster than
    PyYAML's own scanner's, and make the same nodes), keeping each composed node's expanded
    size and height, so that depth and alias limits are checked as the document is composed.
    Without limits it only composes."""

    # libyaml's parser class composes in C too; these keep composing here, where it is counted.
    check_node = Composer.check_node
    get_node = Composer.get_node
    get_single_node = Composer.get_single_node

    if TYPE_CHECKING:  # the parser's, mixed in by _loader_class

        def check_event(self, *choices: type[yaml.Event]) -> bool: ...
        def peek_event(self) -> yaml.Event: ...
        def dispose(self) -> None: ...

    def __init__(
        self,
        stream: str,
        limits: SpecLimits | None,
        too_large: type[SpecLimitExceeded],
        file: str,
    ) -> None:
        _start_parser(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)  # type: ignore[arg-type]  # mixed in by _loader_class
        Resolver.__init__(self)  # type: ignore[arg-type]  # mixed in by _loader_class
        self.limits = limits
        self.too_large = too_large
        self.file = file
        self._depth = 0
        self._aliases = 0
        self._shape: dict[int, tuple[int, int]] = {}  # id(node) → (expanded size, height)

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        limits = self.limits
        if limits is None:
            return super().compose_node(parent, index)
        mark = self.peek_event().start_mark
        line = mark.line + 1 if mark is not None else 1
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > limits.max_aliases:
                self._refuse(spec_limits.too_many_aliases(limits), "aliases", line)
            node = super().compose_node(parent, index)
            shape = self._shape.get(id(node))
            if shape is None:  # the anchor's node is still being composed: it holds itself
                self._refuse("a YAML alias refers to a node that contains it", "", line)
            if self._depth + shape[1] > limits.max_depth:
                self._refuse(spec_limits.too_deep(limits), "depth", line)
            return node
        self._depth += 1
        if self._depth > limits.max_depth:
            self._refuse(spec_limits.too_deep(limits), "depth", line)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        size, height = 1, 1
        if isinstance(node, yaml.SequenceNode | yaml.MappingNode):
            children = (
                node.value
                if isinstance(node, yaml.SequenceNode)
                else [n for pair in node.value for n in pair]
            )
            shapes = [self._shape[id(child)] for child in children]
            size += sum(s for s, _ in shapes)
            height += max((h for _, h in shapes), default=0)
        if size > limits.max_bytes:
            self._refuse(spec_limits.expands_too_far(limits), "bytes", line)
        self._shape[id(node)] = (size, height)
        return node

    def _refuse(self, reason: str, limit: str, line: int) -> NoReturn:
        assert self.limits is not None  # noqa: S101 — only called while limits apply
        setting, maximum = {
            "aliases": (spec_limits.MAX_ALIASES_SETTING, self.limits.max_aliases),
            "depth": (spec_limits.MAX_DEPTH_SETTING, self.limits.max_depth),
            "bytes": (spec_limits.MAX_BYTES_SETTING, self.limits.max_bytes),
            "": ("", 0),
        }[limit]
        raise self.too_large(reason, setting=setting, maximum=maximum, file=self.file, line=line)


try:  # libyaml, which PyYAML's wheels ship; PyYAML's own parser where it is missing
    from yaml._yaml import CParser as _CParser

    _PARSER: tuple[type, ...] = (_CParser,)

    def _start_parser(reader: object, stream: str) -> None:
        _CParser.__init__(reader, stream)  # type: ignore[arg-type]  # a CParser subclass

except ImportError:  # pragma: no cover — every supported platform has a libyaml wheel
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    _PARSER = (Reader, Scanner, Parser)

    def _start_parser(reader: object, stream: str) -> None:
        Reader.__init__(reader, stream)  # type: ignore[arg-type]
        Scanner.__init__(reader)  # type: ignore[arg-type]
        Parser.__init__(reader)  # type: ignore[arg-type]


_CLASSES: dict[type[yaml.SafeLoader], type[_BoundedComposer]] = {}


def _loader_class(loader: type[yaml.SafeLoader]) -> type[_BoundedComposer]:
    """A composer class with `loader`'s tag resolution over the fast parser (one per loader)."""
    made = _CLASSES.get(loader)
    if made is None:
        attrs = {
            "yaml_implicit_resolvers": loader.yaml_implicit_resolvers,
            "yaml_path_resolvers": loader.yaml_path_resolvers,
        }
        bases = (_BoundedComposer, *_PARSER, SafeConstructor, Resolver)
        made = _CLASSES.setdefault(loader, type(f"Bounded{loader.__name__}", bases, attrs))
    return made


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
    """The node as plain Python data (str, int, float, bool, None, list, dict).

    Tags are fixed at compose time (by the dialect's loader), so constructing is the same for
    both dialects. A constructor per call: it remembers every node it built (an alias is
    built once), so a shared one would keep them all and could not serve two threads.
    """
    return SafeConstructor().construct_object(node, deep=True)


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


def yaml_files(directory: Path) -> list[Path]:
    """The spec files directly in `directory` (`*.yaml`, `*.yml`; not its subdirectories), as
    a directory of DAGs or of protocols holds them. Raises OSError when it cannot be listed."""
    return [p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file()]
