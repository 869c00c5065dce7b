"""CLI fixtures: the runtime's `start` (workers on the per-test database), for the tests that
render real runs."""

from __future__ import annotations

from tests.runtime.conftest import Start, start

__all__ = ["Start", "start"]
