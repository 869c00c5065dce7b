"""The wire form of a timestamp (`tether.wire.timestamps.iso`), used by every result that
carries one: task views, tool results, run resources, DAG-run details."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from tether.wire.timestamps import iso


def test_a_utc_time_is_written_with_z() -> None:
    """Our choice: ISO 8601 with a `Z`, as MCP's createdAt / lastUpdatedAt examples are written."""
    assert iso(datetime(2026, 7, 28, 12, 0, 1, 250000, tzinfo=UTC)) == "2026-07-28T12:00:01.250000Z"
    assert iso(datetime(2026, 7, 28, 12, tzinfo=UTC)) == "2026-07-28T12:00:00Z"


def test_another_offset_is_kept() -> None:
    """A time in another zone keeps its offset rather than being read as UTC."""
    east = timezone(timedelta(hours=2))
    assert iso(datetime(2026, 7, 28, 14, tzinfo=east)) == "2026-07-28T14:00:00+02:00"
