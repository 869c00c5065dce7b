"""A timestamp read back from JSON: the ISO 8601 text the runtime stores in a run's waits and
step records, and the wire sends in task views (`createdAt`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any


def timestamp(value: Any) -> datetime | None:
    """The time `value` writes in ISO 8601; None when it is not text, or not such a time."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
