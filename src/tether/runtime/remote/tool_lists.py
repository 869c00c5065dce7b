"""What this process knows of each remote's tools: their input schemas, as the remote's
`tools/list` gave them, kept as long as the list's `ttlMs` says (inside `MIN_TTL_S` and
`MAX_TTL_S`). A `tools/call` reads its tool's schema here to mirror the arguments the schema
marks into `Mcp-Param-*` headers (headers.py).

A list that could not be read (the remote has no `tools/list`, refused it, or was
unreachable) is remembered as empty for `MISSING_TTL_S`: calls go out without parameter
headers meanwhile, and a remote that then refuses a call for a header it wanted
(`HeaderMismatch`) has its list read again once (`expire`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

#: The bounds on how long a remote's tool list is kept: a list that says it is stale at once
#: would cost a `tools/list` before every call; one kept for days would miss a schema change
#: that a refused call does not reveal.
MIN_TTL_S: Final = 10.0
MAX_TTL_S: Final = 3600.0
#: How long a list that could not be read is taken as empty.
MISSING_TTL_S: Final = 60.0
#: The most pages of one `tools/list` followed (a longer list is cut there).
MAX_PAGES: Final = 20


@dataclass
class _Known:
    schemas: Mapping[str, Mapping[str, Any]]  # tool name -> input schema
    until: float  # time.monotonic() after which the list is read again
    listed: bool = True  # False: the list could not be read (taken as empty)


@dataclass
class ToolLists:
    """The tool lists of the remotes this process calls, by remote name."""

    _known: dict[str, _Known] = field(default_factory=dict)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    def schema(self, remote: str, tool: str) -> tuple[bool, Mapping[str, Any] | None]:
        """Whether the remote's list is known and fresh, and the tool's schema in it (None:
        not listed)."""
        known = self._known.get(remote)
        if known is None or time.monotonic() >= known.until:
            return False, None
        return True, known.schemas.get(tool)

    def lock(self, remote: str) -> asyncio.Lock:
        """Held while the remote's list is read, so many calls at once read it once."""
        return self._locks.setdefault(remote, asyncio.Lock())

    def store(
        self, remote: str, tools: list[Mapping[str, Any]], ttl_ms: int | None
    ) -> Mapping[str, Mapping[str, Any]]:
        """Keep the remote's listed tools for its `ttlMs` (inside the bounds)."""
        schemas = {
            str(t["name"]): t["inputSchema"]
            for t in tools
            if isinstance(t.get("name"), str) and isinstance(t.get("inputSchema"), Mapping)
        }
        ttl_s = (ttl_ms or 0) / 1000.0
        ttl_s = min(max(ttl_s, MIN_TTL_S), MAX_TTL_S)
        self._known[remote] = _Known(schemas, time.monotonic() + ttl_s)
        return schemas

    def missing(self, remote: str) -> None:
        """The remote's list could not be read: taken as empty for `MISSING_TTL_S`."""
        self._known[remote] = _Known({}, time.monotonic() + MISSING_TTL_S, listed=False)

    def expire(self, remote: str) -> bool:
        """Read the remote's list again on next use; False when that would tell nothing new (a
        list that could not be read is not read again before its time)."""
        known = self._known.pop(remote, None)
        if known is not None and not known.listed:
            self._known[remote] = known
            return False
        return True
