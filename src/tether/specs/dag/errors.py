"""Errors raised while loading a DAG spec. Each names the field at fault and where it is.

DagSpecError            any refusal; `.field` (the key as written), `.path`, `.file`, `.line`
 ├── InvalidYaml          the text is not one YAML mapping document
 ├── UnknownField         a field outside the supported subset (never silently ignored)
 ├── InvalidValue         a known field with a value of the wrong shape or range
 ├── InvalidReference     a step reference that does not resolve (depends, rewind_to),
 │                        a dependency cycle, or a duplicate step name
 └── LimitExceeded        an inline spec over a limit (bytes, steps, depth, YAML aliases);
                          `.setting` and `.maximum` name it
"""

from __future__ import annotations

from tether.specs.errors import LocatedSpecError, SpecLimitExceeded


class DagSpecError(LocatedSpecError):
    """The DAG spec is invalid.

    Raised by [`App.dag`][tether.App.dag]; its text reads `file:line: path: reason`.

    Attributes:
        reason: Why the spec was refused.
        field: The key at fault, as written in the spec.
        path: Where the key is, such as `steps[build]`.
        file: The spec's file (`<inline>` for text).
        line: The line of the key, counted from 1.
    """


class InvalidYaml(DagSpecError):
    """The text is not one YAML mapping document."""


class UnknownField(DagSpecError):
    """The field is outside the supported subset of Dagu's format."""


class InvalidValue(DagSpecError):
    """The field's value has the wrong shape or is out of range."""


class InvalidReference(DagSpecError):
    """A step reference does not resolve, or the steps form a cycle."""


class LimitExceeded(DagSpecError, SpecLimitExceeded):
    """The spec is over a limit set for caller-supplied documents."""
