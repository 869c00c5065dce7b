"""Limits on a caller-supplied document (an inline DAG spec, a `create_workflow` plan), checked
before the expensive work: its size in bytes, its steps, its nesting depth and its YAML aliases.

The values come from the server's settings, handed down as a plain `SpecLimits`; this package
reads no settings itself. Each refusal names the setting that set the limit and its value, so
a caller knows what to shrink and an operator knows what to raise.

Why these four: composing YAML and validating a spec cost time in proportion to the text, so
`max_bytes` bounds both; a spec's runs, status reads and replays cost time per step, so
`max_steps` bounds them; the loaders walk a document recursively, so `max_depth` keeps them far
from Python's recursion limit; and an alias repeats a whole subtree without writing it out (a
few hundred bytes can stand for a billion nodes), so aliases are counted while the document is
composed, and a document whose aliases would expand it to more nodes than `max_bytes` could
hold written out is refused before anything walks it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

#: The settings (environment variables) each limit comes from; refusals name them.
MAX_BYTES_SETTING: Final = "TETHER_SPEC_MAX_BYTES"
MAX_STEPS_SETTING: Final = "TETHER_SPEC_MAX_STEPS"
MAX_DEPTH_SETTING: Final = "TETHER_SPEC_MAX_DEPTH"
MAX_ALIASES_SETTING: Final = "TETHER_SPEC_MAX_ALIASES"

DEFAULT_MAX_BYTES: Final = 256 * 1024
DEFAULT_MAX_STEPS: Final = 1000
DEFAULT_MAX_DEPTH: Final = 32
DEFAULT_MAX_ALIASES: Final = 100


@dataclass(frozen=True)
class SpecLimits:
    """The limits one caller-supplied document must keep (each at least 1)."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_steps: int = DEFAULT_MAX_STEPS
    max_depth: int = DEFAULT_MAX_DEPTH
    max_aliases: int = DEFAULT_MAX_ALIASES

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_steps", "max_depth", "max_aliases"):
            if getattr(self, name) < 1:
                raise ValueError(f"SpecLimits.{name} must be at least 1")


def over_bytes(text: str, limits: SpecLimits) -> str | None:
    """Why `text` is too large (its UTF-8 size over `max_bytes`), else None; O(len(text))."""
    if len(text) <= limits.max_bytes // 4:  # 4 bytes at most per character
        return None
    size = len(text) if len(text) > limits.max_bytes else _utf8_size(text)
    if size <= limits.max_bytes:
        return None
    return (
        f"the document is {size} bytes or more, over the limit of {limits.max_bytes} "
        f"bytes ({MAX_BYTES_SETTING}={limits.max_bytes})"
    )


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def over_steps(count: int, limits: SpecLimits) -> str | None:
    """Why `count` steps are too many, else None."""
    if count <= limits.max_steps:
        return None
    return (
        f"the document has {count} steps, over the limit of {limits.max_steps} "
        f"({MAX_STEPS_SETTING}={limits.max_steps})"
    )


def too_deep(limits: SpecLimits) -> str:
    return (
        f"the document nests deeper than {limits.max_depth} levels "
        f"({MAX_DEPTH_SETTING}={limits.max_depth})"
    )


def too_many_aliases(limits: SpecLimits) -> str:
    return (
        f"the document uses more than {limits.max_aliases} YAML aliases "
        f"({MAX_ALIASES_SETTING}={limits.max_aliases})"
    )


def expands_too_far(limits: SpecLimits) -> str:
    return (
        f"the document's YAML aliases expand it to more than {limits.max_bytes} nodes, more "
        f"than its size limit could hold written out ({MAX_BYTES_SETTING}={limits.max_bytes})"
    )


def json_over_depth(value: object, limits: SpecLimits) -> bool:
    """Whether a JSON value (dicts, lists, scalars) nests deeper than `max_depth`: a scalar or
    an empty container is one level. Iterative, and stops at the first level too deep."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limits.max_depth:
            return True
        if isinstance(item, Mapping):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, Sequence) and not isinstance(item, str | bytes):
            stack.extend((v, depth + 1) for v in item)
    return False
