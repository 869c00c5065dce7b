"""The base of every spec loader's refusals: a reason located at a field, a file and a line.

Each dialect (`specs.dag`, `specs.realm`) derives its own tree from `LocatedSpecError`, so
callers catch `DagSpecError` or `RealmSpecError` and never the other's.
"""

from __future__ import annotations

import copyreg
from typing import Any, Final

#: The `file` of a spec that came as text, not from a file (what a refusal names as its file).
INLINE: Final = "<inline>"


class LocatedSpecError(Exception):
    """A spec is invalid; `.field` (the key as written), `.path`, `.file`, `.line` say where.

    It pickles (a document worker raises it in another process): rebuilt from its fields,
    since its constructor takes them by keyword.
    """

    def __init__(self, reason: str, *, field: str, path: str, file: str, line: int) -> None:
        self.reason = reason
        self.field = field
        self.path = path
        self.file = file
        self.line = line
        super().__init__(f"{file}:{line}: {path}: {reason}" if path else f"{file}:{line}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (copyreg.__newobj__, (type(self), *self.args), self.__dict__)  # type: ignore[attr-defined]  # copyreg's documented protocol-2 constructor, not in its stubs


class SpecLimitExceeded(LocatedSpecError):
    """A caller-supplied document is over one of its limits (`specs.limits`); `.setting` names
    the setting that set it and `.maximum` its value."""

    def __init__(
        self,
        reason: str,
        *,
        setting: str,
        maximum: int,
        field: str = "",
        path: str = "",
        file: str,
        line: int,
    ) -> None:
        self.setting = setting
        self.maximum = maximum
        super().__init__(reason, field=field, path=path, file=file, line=line)
