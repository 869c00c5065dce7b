"""Errors raised while loading a protocol workflow. Each names the field at fault and where it is.

RealmSpecError          any refusal; `.field` (the key as written), `.path`, `.file`, `.line`
 ├── InvalidYaml          the text is not one YAML mapping document
 ├── UnknownField         a field outside the supported subset (never silently ignored)
 ├── InvalidValue         a known field with a value of the wrong shape or range
 ├── InvalidReference     a step reference that does not resolve, a cycle, a reserved id
 └── LimitExceeded        a `create_workflow` plan over a limit (bytes, steps, depth);
                          `.setting` and `.maximum` name it
"""

from __future__ import annotations

from tether.specs.errors import LocatedSpecError, SpecLimitExceeded


class RealmSpecError(LocatedSpecError):
    """The protocol workflow is invalid."""


class InvalidYaml(RealmSpecError):
    """The text is not one YAML mapping document."""


class UnknownField(RealmSpecError):
    """The field is outside the supported subset of Realm's format."""


class InvalidValue(RealmSpecError):
    """The field's value has the wrong shape or is out of range."""


class InvalidReference(RealmSpecError):
    """A step reference does not resolve, the steps form a cycle, or an id is reserved."""


class LimitExceeded(RealmSpecError, SpecLimitExceeded):
    """The plan is over a limit set for caller-supplied documents."""
