"""Small judgements the scenarios share: "is this the error X with HTTP H", "is this a result"."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from tether.conformance import spec
from tether.conformance.client import Exchange


def describe(ex: Exchange) -> str:
    """A short account of a reply, for messages."""
    if ex.transport_error is not None:
        return f"no reply ({ex.transport_error})"
    if ex.error is not None:
        return f"HTTP {ex.status} error {ex.code} {str(ex.error.get('message', ''))[:80]!r}"
    if ex.result is not None:
        return f"HTTP {ex.status} result {json.dumps(ex.result)[:120]}"
    return f"HTTP {ex.status} {ex.content_type or 'no content type'} {ex.response_text[:80]!r}"


def error_problems(ex: Exchange, code: int, status: int | None = None) -> list[str]:
    """What is wrong with `ex` as the JSON-RPC error `code` (sent with HTTP `status`)."""
    if ex.error is None or ex.code != code:
        return [f"expected error {code}, got {describe(ex)}"]
    if status is not None and ex.status != status:
        return [f"error {code} came with HTTP {ex.status}, expected {status}"]
    return []


def spec_error_problems(ex: Exchange, code: int) -> list[str]:
    """`error_problems` with the HTTP status the spec fixes for `code` (400 or 404)."""
    return error_problems(ex, code, spec.HTTP_STATUS.get(code))


def result_problems(ex: Exchange) -> list[str]:
    """What is wrong with `ex` as a successful reply (HTTP 200 with a result)."""
    if ex.result is None:
        return [f"expected a result, got {describe(ex)}"]
    if ex.status != 200:
        return [f"the result came with HTTP {ex.status}"]
    return []


def ack_problems(ex: Exchange) -> list[str]:
    """What is wrong with `ex` as an empty acknowledgement `{"resultType": "complete"}`."""
    problems = result_problems(ex)
    if problems or ex.result is None:
        return problems
    if ex.result.get("resultType") != "complete":
        problems.append(f"ack resultType is {ex.result.get('resultType')!r}, not 'complete'")
    extra = sorted(set(ex.result) - {"resultType", "_meta"})
    if extra:
        problems.append(f"the ack carries {extra}")
    return problems


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def timestamp(value: Any) -> datetime | None:
    """An ISO 8601 date-time string as a datetime (None when it is not one)."""
    if not isinstance(value, str) or "T" not in value.upper():
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None


def is_task_result(result: dict[str, Any] | None) -> bool:
    """Whether a result is (or smuggles) a task: resultType task, a taskId, or a legacy `task`."""
    if result is None:
        return False
    return result.get("resultType") == "task" or "taskId" in result or "task" in result
