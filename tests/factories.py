"""Test data: execution rows with sensible defaults, for the pure tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tether.storage.rows import ExecutionRow

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def execution_row(**overrides: Any) -> ExecutionRow:
    """A live run created at T0; any column can be overridden."""
    rid = overrides.get("id", "ex_" + "a" * 32)
    values: dict[str, Any] = {
        "id": rid,
        "workflow": "wf",
        "business_id": rid,
        "status": "running",
        "version": 1,
        "last_event_id": 1,
        "input": None,
        "output": None,
        "error": None,
        "waits": [],
        "details": None,
        "cancel_requested": False,
        "idempotency_key": None,
        "predecessor_id": None,
        "successor_id": None,
        "root_id": rid,
        "sealed_from": None,
        "retention_s": None,
        "created_at": T0,
        "updated_at": T0,
        "ended_at": None,
        "expires_at": None,
        "wake_at": None,
        "deadline_at": None,
        "lease_owner": None,
        "lease_until": None,
        "attempt": 1,
        "run_attempt": 1,
    }
    values.update(overrides)
    return ExecutionRow(**values)
