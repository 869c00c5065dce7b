"""Tether's reliability suite: chaos under load, database outages, lease fencing, soak and bad
input at volume. Run it with `python -m reliability.chaos` (see docs/reliability.md)."""

from __future__ import annotations
