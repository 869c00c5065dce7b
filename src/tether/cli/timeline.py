"""A run's timeline for `tether runs show --history`. Pure: the row, its history events and its
recorded calls in; entries out.

Each entry is placed when it happened: an event when it was written, a step when its result was
recorded, a wait when it was answered (or opened, while open), a sleep when it ends. What is
known of how long something took is given with it: a wait from its opening to its answer; a
sleep from the call before it to its end; a step from the call before it to its result. After
the run waited (its creation, a sleep, a wait, a failed try's backoff) that span also holds the
time a worker took to take the run up again, so it is an upper bound (`bound`, shown `≤`). A
step's attempts are counted from its record (`failures`); a DAG's steps are listed with the
statuses Dagu gives them (runtime/dag/status.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import orjson

from tether.runtime.dag.status import StepDetail, dag_status
from tether.runtime.rows import ExecutionRow, HistoryEvent, StepRecord
from tether.tasks.views import error_text

QUIET_KINDS: Final = frozenset({"now", "uuid"})  # recorded values, not work the run did
DETAIL_CHARS: Final = 120


@dataclass(frozen=True)
class Entry:
    """One line of the timeline."""

    at: datetime | None
    what: str
    took: float | None = None  # seconds, where known
    detail: str = ""
    bound: bool = False  # `took` also holds the wait for a worker: at most this long


def span(seconds: float) -> str:
    """`850 ms`, `9.4 s`, `3 min 5 s`, `2 h 10 min`, `3 days 4 h`."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min"
    days, hours = divmod(hours, 24)
    return f"{days} day{'s' if days != 1 else ''} {hours} h"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


def _attempts(failures: int) -> str:
    return f"{failures + 1} attempts" if failures else "1 attempt"


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _between(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None or end < start:
        return None
    return (end - start).total_seconds()


def _step(record: StepRecord, busy_since: datetime | None, resumed: bool) -> Entry:
    result = record.result if isinstance(record.result, dict) else {}
    failures = int(result.get("failures") or 0)
    took = _between(busy_since, record.at)
    bound = resumed or failures > 0
    what = f"{record.kind} {record.name}"
    if not record.done:
        error = result.get("error") or {}
        last = f"{error.get('type')}: {error.get('message')}" if error else ""
        return Entry(record.at, what, None, f"retrying after {failures} failed: {last}")
    if "error" in result:
        error = result["error"] if isinstance(result["error"], dict) else {}
        detail = f"failed, {_attempts(failures - 1 if failures else 0)}: "
        detail += f"{error.get('type')}: {error.get('message')}"
        return Entry(record.at, what, took, _short(detail), bound)
    value = _short(result.get("value"))
    return Entry(record.at, what, took, f"{_attempts(failures)} → {value}", bound)


def _label(channels: str) -> str:
    """`approval:publish,signal:go` → `approval 'publish', signal 'go'`."""
    named = (c.partition(":") for c in channels.split(","))
    return ", ".join(f"{kind} {name!r}" if sep else kind for kind, sep, name in named)


def _wait(record: StepRecord) -> Entry:
    state = record.result if isinstance(record.result, dict) else {}
    opened = _time(state.get("opened_at"))
    label = _label(record.name)
    if not record.done:
        deadline = f", deadline {state['deadline']}" if state.get("deadline") else ""
        return Entry(opened or record.at, f"wait {label}", None, f"open{deadline}")
    took = _between(opened, record.at)
    if state.get("timed_out"):
        return Entry(record.at, f"wait {label}", took, "timed out")
    answers = state.get("answers") or {}
    who = sorted(
        {str(a.get("by")) for a in answers.values() if isinstance(a, dict) and a.get("by")}
    )
    said = [_decision(a) for a in answers.values() if isinstance(a, dict)]
    detail = "answered" + (f" by {', '.join(who)}" if who else "")
    shown = [s for s in said if s]
    if shown:
        detail += f": {', '.join(shown)}"
    return Entry(record.at, f"wait {label}", took, _short(detail))


def _decision(answer: dict[str, Any]) -> str:
    payload = answer.get("payload")
    if isinstance(payload, dict) and isinstance(payload.get("decision"), str):
        return str(payload["decision"])
    return ""


def _sleep(record: StepRecord, busy_since: datetime | None) -> Entry:
    state = record.result if isinstance(record.result, dict) else {}
    until = _time(state.get("until"))
    if record.done:
        return Entry(until or record.at, "sleep", _between(busy_since, until), "")
    return Entry(record.at, "sleep", None, f"until {state.get('until')}")


def _event(event: HistoryEvent) -> Entry:
    data = event.data if isinstance(event.data, dict) else {}
    by = f"by {data['by']}" if data.get("by") else ""
    if event.type == "ended":
        status = str(data.get("status"))
        failed = data.get("error") is not None
        return Entry(
            event.at, f"ended {status}", None, error_text(data["error"], status) if failed else ""
        )
    rest = [
        f"{k} {v if isinstance(v, str) else _short(v)}"
        for k, v in data.items()
        if k != "by" and v not in (None, {}, [])
    ]
    return Entry(
        event.at, event.type.replace("_", " "), None, _short(", ".join([by, *rest]).strip(", "))
    )


def timeline(
    row: ExecutionRow, events: Iterable[HistoryEvent], records: Sequence[StepRecord]
) -> list[Entry]:
    """The run's events and recorded calls in the order they happened (see the module
    docstring for what each entry's time and duration mean)."""
    entries = [_event(e) for e in events]
    busy_since: datetime | None = row.admitted_at or row.created_at
    resumed = True  # the run waited for a worker before its first call
    for record in sorted(records, key=lambda r: r.seq):
        if record.kind in QUIET_KINDS:
            continue
        if record.kind in ("step", "transaction"):
            entry = _step(record, busy_since, resumed)
        elif record.kind == "wait":
            entry = _wait(record)
        elif record.kind == "sleep":
            entry = _sleep(record, busy_since)
        else:
            entry = Entry(record.at, f"{record.kind} {record.name}", None, _short(record.result))
        entries.append(entry)
        if record.done and entry.at is not None:
            busy_since = entry.at
            resumed = record.kind in ("wait", "sleep")
    if row.ended_at is not None and not any(e.what.startswith("ended") for e in entries):
        failed = row.error is not None and row.status != "completed"
        detail = error_text(row.error, row.status) if failed else ""
        entries.append(Entry(row.ended_at, f"ended {row.status}", None, detail))
    order = {id(e): n for n, e in enumerate(entries)}
    return sorted(entries, key=lambda e: (e.at is None, e.at or row.created_at, order[id(e)]))


def dag_steps(row: ExecutionRow, records: Sequence[StepRecord]) -> tuple[StepDetail, ...]:
    """A DAG run's steps with their statuses (empty for any other run)."""
    return dag_status(row, records).steps
