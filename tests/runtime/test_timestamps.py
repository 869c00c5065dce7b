"""A timestamp read back from JSON (runtime/timestamps.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tether.runtime.timestamps import timestamp


def test_iso_text_reads_as_the_time_it_writes() -> None:
    """Our choice: the runtime's `isoformat` text and the wire's `Z` form read the same."""
    at = datetime(2026, 7, 28, 12, 0, 0, 123456, tzinfo=UTC)
    assert timestamp(at.isoformat()) == at
    assert timestamp("2026-07-28T12:00:00.123456Z") == at
    assert timestamp("2026-07-28T14:00:00.123456+02:00") == at


@pytest.mark.parametrize("value", [None, 1_700_000_000, "", "yesterday", ["2026-07-28"]])
def test_a_value_that_is_not_iso_text_reads_as_none(value: object) -> None:
    """Our choice: a missing or malformed time is shown as unknown, never an error."""
    assert timestamp(value) is None
