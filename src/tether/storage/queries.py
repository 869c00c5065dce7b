"""Named SQL: `sql/queries.sql` holds blocks headed `-- name: <name>` and a `-- ` description.

Loaded once at import into a read-only mapping, so a typo in a query name fails at import
time in tests rather than at run time in production.
"""

from __future__ import annotations

import re
from importlib import resources
from types import MappingProxyType
from typing import Final

_HEADER = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse(text: str) -> dict[str, str]:
    """Split a queries file into {name: sql}. Raises ValueError on a duplicate or empty block."""
    parts = _HEADER.split(text)
    out: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [ln for ln in body.strip().splitlines() if not ln.lstrip().startswith("--")]
        sql = "\n".join(lines).strip().rstrip(";").strip()
        if not sql:
            raise ValueError(f"query {name!r} is empty")
        if name in out:
            raise ValueError(f"query {name!r} is defined twice")
        out[name] = sql
    return out


def _load() -> MappingProxyType[str, str]:
    text = resources.files("tether.storage").joinpath("sql/queries.sql").read_text("utf-8")
    return MappingProxyType(parse(text))


Q: Final = _load()
