"""`tether runs start --batch FILE|-`: many starts from JSON lines, one statement per 1,000.

Each non-blank line is one object: `workflow` (required), and optionally `input`,
`idempotency_key`, `business_id`, `queue`, `profile`, `labels` (a list of `key=value` or an
object), `singleton` (`running` | `active`) and `on_live_match` (`return` | `fail`). Every line
is read and checked before anything starts: a malformed line or an unknown key is refused by
name and nothing starts. The output is one JSON line per input line, in order:
`{"line", "execution_id", "status", "deduped"}`, or `{"line", "error": {"type", "message"}}`
for an item the runtime refused (the others still start).
"""

from __future__ import annotations

import sys
from typing import Any

import orjson

from tether.runtime import errors
from tether.runtime.operations import Operations, Started, StartRequest
from tether.runtime.operations.batching import MAX_BATCH

FIELDS = frozenset(
    {
        "workflow",
        "input",
        "idempotency_key",
        "business_id",
        "queue",
        "profile",
        "labels",
        "singleton",
        "on_live_match",
    }
)

TEXT_FIELDS = ("idempotency_key", "business_id", "queue", "profile", "singleton", "on_live_match")


def _request(number: int, line: str) -> StartRequest:
    try:
        item = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"line {number}: not JSON: {line[:80]!r}") from exc
    if not isinstance(item, dict):
        raise ValueError(f"line {number}: expected a JSON object")
    unknown = sorted(set(item) - FIELDS)
    if unknown:
        raise ValueError(f"line {number}: unknown key(s) {', '.join(unknown)}")
    if not isinstance(item.get("workflow"), str):
        raise ValueError(f"line {number}: 'workflow' (a string) is required")
    for key in TEXT_FIELDS:
        if item.get(key) is not None and not isinstance(item[key], str):
            raise ValueError(f"line {number}: {key!r} must be a string")
    if not isinstance(item.get("labels") or [], list | dict):
        raise ValueError(f"line {number}: 'labels' must be a list or an object")
    return StartRequest(**item)


def parse(text: str) -> list[tuple[int, StartRequest]]:
    """(line number, request) for each non-blank line. Raises ValueError naming the line."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise ValueError("the batch has no starts")
    return [(n, _request(n, line)) for n, line in lines]


def read(source: str) -> str:
    """The batch's text: a file, or standard input for `-`. Raises ValueError."""
    if source == "-":
        return sys.stdin.read()
    try:
        with open(source, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise ValueError(f"cannot read {source}: {exc.strerror}") from exc


def _line(number: int, outcome: Started | errors.TetherError) -> dict[str, Any]:
    if isinstance(outcome, errors.TetherError):
        return {"line": number, "error": {"type": type(outcome).__name__, "message": str(outcome)}}
    row = outcome.execution
    return {
        "line": number,
        "execution_id": row.id,
        "status": row.status,
        "deduped": outcome.deduped,
    }


async def start(ops: Operations, items: list[tuple[int, StartRequest]]) -> list[dict[str, Any]]:
    """Start the items in chunks of MAX_BATCH; one result dict per item, in order."""
    out: list[dict[str, Any]] = []
    for first in range(0, len(items), MAX_BATCH):
        chunk = items[first : first + MAX_BATCH]
        outcomes = await ops.start_many([req for _, req in chunk], by="cli")
        out += [_line(n, o) for (n, _), o in zip(chunk, outcomes, strict=True)]
    return out
