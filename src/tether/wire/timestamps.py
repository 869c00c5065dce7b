"""The wire form of a timestamp, in every result a surface sends (task views, tool results,
run resources, DAG-run details): ISO 8601 in UTC with a `Z`, as MCP's `createdAt` and
`lastUpdatedAt` are written."""

from __future__ import annotations

from datetime import datetime


def iso(dt: datetime) -> str:
    """`dt` as the wire writes it: `2026-07-28T12:00:00.123456Z` for a UTC time (a time with
    another offset, or none, as `isoformat` writes it)."""
    return dt.isoformat().replace("+00:00", "Z")
