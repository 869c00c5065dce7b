"""Pure helpers over runs and their chains (retry and continue-as-new links)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tether.storage.rows import ExecutionRow

Outcome = Literal[
    "live", "waiting", "succeeded", "workflow_error", "protocol_error", "cancelled", "continued"
]


def follow(rows: Mapping[str, ExecutionRow], start: str, *, limit: int = 10_000) -> ExecutionRow:
    """The run a handle resolves to: follow successor links from `start` to the last run.

    Stops at a missing successor (deleted by retention) or a cycle, returning the last run seen.
    Raises KeyError when `start` itself is not in `rows`.
    """
    current = rows[start]
    seen = {current.id}
    for _ in range(limit):
        nxt = current.successor_id
        if nxt is None or nxt in seen or nxt not in rows:
            return current
        current = rows[nxt]
        seen.add(current.id)
    return current


@dataclass(frozen=True)
class RunOutcome:
    """What a run amounts to for a caller, whatever sealed it since."""

    outcome: Outcome
    status: str  # the status that decided the outcome (sealed_from for sealed runs)


def outcome(row: ExecutionRow) -> RunOutcome:
    """Map a row to its outcome. A run sealed by an operator rerun keeps the ending it had;
    a terminated run that was live reads cancelled."""
    status = row.sealed_from or row.status
    error = row.error if isinstance(row.error, dict) else {}
    if status in ("pending", "running"):
        return RunOutcome("live", status)
    if status == "waiting":
        return RunOutcome("waiting", status)
    if status == "completed":
        return RunOutcome("succeeded", status)
    if status in ("failed", "timed_out"):
        if error.get("kind") == "protocol":
            return RunOutcome("protocol_error", status)
        return RunOutcome("workflow_error", status)
    if status == "continued_as_new":
        return RunOutcome("continued", status)
    return RunOutcome("cancelled", status)  # cancelled, terminated


def error_text(error: Any, status: str) -> str:
    """A run's error in words: `Type: message` (the status stands in for what is missing)."""
    err = error if isinstance(error, dict) else {}
    message = err.get("message") or ("timed out" if status == "timed_out" else "failed")
    kind = err.get("type") or err.get("kind") or status
    return f"{kind}: {message}"
