"""Named SQL: `sql/queries.sql` holds blocks headed `-- name: <name>` and a `-- ` description.

Loaded once at import into a read-only mapping, so a typo in a query name fails at import
time in tests rather than at run time in production.

Parts. A block headed `-- part: <name>` is a piece of SQL that is not a query: queries (and
other parts) include it where they say `{{ name }}`, so a rule several statements apply (the
state transition of a worker's write, the claim's rules) is written once, and the statements
that apply it are one text by construction. `{{ name from $N }}` includes the part with its
parameters numbered from $N ($1 becomes $N, $2 becomes $N+1, ...), for a statement with
parameters of its own before the part's. A part is inserted as written, its comment lines
dropped and its later lines indented as the line that includes it; it may not hold an inline
comment (which would swallow the rest of the line it is included in). The statements sent
are the expanded texts, so PostgreSQL plans and runs what it would for the same SQL written
out in full: the mechanism costs nothing after import.

Some parts come from Python, for facts Python holds too (`GIVEN`): `ended_statuses` is the SQL
list of `rows.ENDED_STATUSES`, the statuses that end a run, so the queries and the runtime read
one definition.

Every part must be defined once and used, and no part may include itself; anything else, or an
inclusion left unexpanded, is a ValueError at import.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from importlib import resources
from types import MappingProxyType
from typing import Final

from tether.storage.rows import ENDED_STATUSES

_HEADER = re.compile(r"^-- (name|part): ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)(?:\s+from\s+\$([1-9][0-9]*))?\s*\}\}")
_PARAMETER = re.compile(r"\$([1-9][0-9]*)")


def sql_strings(values: Iterable[str]) -> str:
    """`values` as a comma-separated list of SQL string literals, sorted (for `IN (...)`)."""
    return ", ".join("'" + value.replace("'", "''") + "'" for value in sorted(values))


GIVEN: Final[Mapping[str, str]] = MappingProxyType({"ended_statuses": sql_strings(ENDED_STATUSES)})


def parse(text: str, given: Mapping[str, str] | None = None) -> dict[str, str]:
    """Split a queries file into {name: sql}, every part included (`given`: parts defined
    outside the file). Raises ValueError on a duplicate or empty block, an unknown, unused or
    self-including part, an inline comment in a part, or an inclusion left unexpanded."""
    parts = dict(given or {})
    queries: dict[str, str] = {}
    pieces = _HEADER.split(text)
    for kind, name, body in zip(pieces[1::3], pieces[2::3], pieces[3::3], strict=True):
        lines = [ln for ln in body.strip().splitlines() if not ln.lstrip().startswith("--")]
        sql = "\n".join(lines).strip().rstrip(";").strip()
        if not sql:
            raise ValueError(f"{kind} {name!r} is empty")
        if name in queries or name in parts:
            raise ValueError(f"{kind} {name!r} is defined twice")
        if kind == "part" and "--" in sql:
            raise ValueError(f"part {name!r} holds an inline comment")
        (parts if kind == "part" else queries)[name] = sql
    used: set[str] = set()

    def expand(sql: str, within: tuple[str, ...]) -> str:
        def include(found: re.Match[str]) -> str:
            name, start = found.group(1), found.group(2)
            if name not in parts:
                raise ValueError(f"part {name!r} is not defined (in {within[0]!r})")
            if name in within:
                raise ValueError(f"part {name!r} includes itself")
            used.add(name)
            part = expand(parts[name], (*within, name))
            if start is not None:
                shift = int(start) - 1
                part = _PARAMETER.sub(lambda p: f"${int(p.group(1)) + shift}", part)
            line = sql[sql.rfind("\n", 0, found.start()) + 1 :]
            indent = line[: len(line) - len(line.lstrip(" "))]
            return part.replace("\n", "\n" + indent)

        out = _INCLUDE.sub(include, sql)
        if "{{" in out or "}}" in out:
            raise ValueError(f"{within[-1]!r} has an inclusion that is not `{{{{ name }}}}`")
        return out

    expanded = {name: expand(sql, (name,)) for name, sql in queries.items()}
    unused = sorted(parts.keys() - used)
    if unused:
        raise ValueError(f"parts defined but never included: {unused}")
    return expanded


def _load() -> MappingProxyType[str, str]:
    text = resources.files("tether.storage").joinpath("sql/queries.sql").read_text("utf-8")
    return MappingProxyType(parse(text, GIVEN))


Q: Final = _load()
