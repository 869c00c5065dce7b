"""Execution statuses for the runtime and every surface above it.

They are defined once, beside the row and the database CHECK they mirror (`storage/rows.py`,
since storage imports no other tether package); code above storage imports them from here.
"""

from __future__ import annotations

from tether.storage.rows import ENDED_STATUSES, LIVE_STATUSES, STATUSES, Status

__all__ = ["ENDED_STATUSES", "LIVE_STATUSES", "STATUSES", "Status"]
