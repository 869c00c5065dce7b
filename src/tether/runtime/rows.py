"""The run records the runtime hands to surfaces, re-exported from storage.

Surfaces (tasks, tools, mcp, the CLI) reach storage only through the runtime (an import-linter
contract); they import these types from here. The classes are storage's own (frozen dataclasses
built from a database row), so nothing is copied on the way up.
"""

from __future__ import annotations

from tether.storage.rows import ExecutionRow, HistoryEvent, StepRecord, UpdateRow

__all__ = ["ExecutionRow", "HistoryEvent", "StepRecord", "UpdateRow"]
