"""A run's timeline (PURE): its history events and recorded calls merged in the order they
happened, one bounded page at a time. Every surface that shows a run's history shows these
entries, each in its own words and styling; the rules are here.

Where each entry sits: an event when it was written; a step when its result was recorded; a
wait twice, when it opened and when it was answered (or timed out); a sleep when it began
(while it lasts) or when it ended. What is known of how long something took goes with it: a
wait from its opening to its answer; a sleep and a step from the call before them to their
end. After the run waited (its creation, a sleep, a wait, a failed try's backoff) that span
also holds the time a worker took to take the run up again, so it is an upper bound (`bound`,
shown `≤`). A step's attempts come from its record (`failures`: the failed tries before its
result). Calls of the quiet kinds (recorded values) and the DAG interpreter's own records show
nothing, but still mark where the run was: the next call's duration starts from them. At the
same moment a call comes before an event; a call read without its time sits at the run's
start. An answer event whose wait is shown answered on the same page is left out (the wait's
entry says who and what) unless the caller asks for every answer.

Paging: the page reads at most `limit + 1` of the newest events and of the newest records
before a cursor (`Cursor`), keeps the newest `limit` entries, and hands back the cursor of the
page before it when anything older is left. The extra record read is the call before the page's
first step, which its duration starts from. With no limit, the page is the whole timeline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import orjson

from tether.runtime.chain import error_text
from tether.runtime.rows import ExecutionRow, HistoryEvent, StepRecord
from tether.runtime.timestamps import timestamp

#: Entries on one page of the timeline.
PAGE: Final = 100
#: Recorded values, not work the run did.
QUIET_KINDS: Final = frozenset({"now", "uuid"})
#: The longest detail line, in characters (a longer one is cut, ending in `…`).
DETAIL_CHARS: Final = 160
#: The DAG interpreter's own bookkeeping records (its spec, its open asks): not steps.
DAG_INTERNAL: Final = "dag:"


def span(seconds: float) -> str:
    """A duration in words: `850 ms`, `9.4 s`, `3 min 5 s`, `2 h 10 min`, `3 days 4 h`."""
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


def took_text(took: float | None, bound: bool) -> str:
    """How long something took in words, `≤ 1.6 s` for an upper bound; empty when unknown."""
    return "" if took is None else ("≤ " if bound else "") + span(took)


def short(value: Any) -> str:
    """A value in one line: a string as it is, anything else as JSON; cut at `DETAIL_CHARS`."""
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


@dataclass(frozen=True)
class Entry:
    """One line of the timeline."""

    at: datetime | None
    kind: str  # created, step, wait, answered, sleep, slept, event, ended (or a call's kind)
    title: str
    # A status word: a run's (`running`, `completed`, `failed` …), or `retrying`, `rejected`,
    # `event` (an event that changes no status)
    status: str
    took: float | None = None  # seconds, where known
    bound: bool = False  # `took` also holds the wait for a worker: at most this long
    attempts: int | None = None  # a step's tries
    by: str | None = None  # who started, answered, signalled, cancelled
    decision: str | None = None  # an approval's or task's decision, as given (`request_changes`)
    detail: str = ""
    data: Any = None  # the whole value, where the line does not show all of it (None: none)
    seq: int | None = None  # the recorded call it shows (None: an event, or the run's end)
    event: HistoryEvent | None = None  # the history event it shows
    channels: tuple[tuple[str, str], ...] = ()  # a wait's channels: (kind, name or "")
    until: datetime | None = None  # when a sleep ends, or an open wait's deadline

    def took_text(self) -> str:
        """How long it took in words (`took_text`)."""
        return took_text(self.took, self.bound)

    def attempts_text(self) -> str:
        """`1 attempt`, `3 attempts`; empty when not counted."""
        if self.attempts is None:
            return ""
        return f"{self.attempts} attempt{'' if self.attempts == 1 else 's'}"


@dataclass(frozen=True)
class Cursor:
    """Where a page ends: events before `event_id` and records before `seq` (None: none)."""

    event_id: int | None
    seq: int | None

    def text(self) -> str:
        """`<event_id>.<seq>`, either part empty for None."""
        event = "" if self.event_id is None else self.event_id
        return f"{event}.{'' if self.seq is None else self.seq}"

    @staticmethod
    def parse(text: str | None) -> Cursor | None:
        """The cursor a page link carries; None for none or one that is not a cursor."""
        if not text:
            return None
        event, sep, seq = text.partition(".")
        if not sep or len(event) > 18 or len(seq) > 9:
            return None
        if not all(part == "" or part.isdigit() for part in (event, seq)):
            return None
        return Cursor(int(event) if event else None, int(seq) if seq else None)


@dataclass(frozen=True)
class Page:
    """One page of the timeline."""

    entries: tuple[Entry, ...]  # oldest first
    earlier: Cursor | None  # the page before this one (None: this page starts the run)


def _between(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None or end < start:
        return None
    return (end - start).total_seconds()


def _error(error: Any) -> str:
    """A failed try's error in words: `Type: message`."""
    if isinstance(error, dict):
        return f"{error.get('type') or 'Error'}: {error.get('message')}"
    return short(error)


def _step_title(record: StepRecord) -> str:
    kind, sep, name = record.name.partition(":")
    if sep and kind == "node":  # a DAG step's work
        return f"step {name}"
    if sep and kind == "call":  # a DAG step calling another DAG
        return f"call {name}"
    return f"{record.kind} {record.name}"


def _step(record: StepRecord, busy_since: datetime | None, resumed: bool) -> Entry:
    result = record.result if isinstance(record.result, dict) else {}
    failures = int(result.get("failures") or 0)
    title = _step_title(record)
    if not record.done:  # between tries
        return Entry(
            record.at,
            "step",
            title,
            "retrying",
            attempts=failures,
            detail=f"try {failures} failed, retrying: {_error(result.get('error'))}",
            data=result,
            seq=record.seq,
        )
    took = _between(busy_since, record.at)
    bound = resumed or failures > 0
    if "error" in result:
        return Entry(
            record.at,
            "step",
            title,
            "failed",
            took,
            bound,
            attempts=max(failures, 1),
            detail=short(_error(result["error"])),
            seq=record.seq,
        )
    value = result.get("value", result)
    return Entry(
        record.at,
        "step",
        title,
        "completed",
        took,
        bound,
        attempts=failures + 1,
        detail=_said(value),
        data=_more(value),
        seq=record.seq,
    )


def _said(value: Any) -> str:
    """A step's result in a line: a DAG step's output (or exit code), else the value."""
    if isinstance(value, dict) and "exit_code" in value:
        out = str(value.get("stdout") or "").strip()
        return short(out) if out else f"exit code {value['exit_code']}"
    return "" if value is None else short(value)


def _more(value: Any) -> Any:
    """The whole value, when its line does not already show all of it (None: it does)."""
    said = _said(value)
    nested = isinstance(value, dict | list) and bool(value)
    return value if nested or said.endswith("…") or said != short(value) else None


def _channels(names: str) -> tuple[tuple[str, str], ...]:
    """`approval:publish,signal:go` → `(("approval", "publish"), ("signal", "go"))`."""
    return tuple((kind, name) for kind, _, name in (c.partition(":") for c in names.split(",")))


def _label(channels: tuple[tuple[str, str], ...]) -> str:
    """`approval publish, signal go`."""
    return ", ".join(f"{kind} {name}" if name else kind for kind, name in channels)


def _decision(answer: Any) -> str | None:
    payload = answer.get("payload") if isinstance(answer, dict) else None
    if isinstance(payload, dict) and isinstance(payload.get("decision"), str):
        return str(payload["decision"])
    return None


def _wait(record: StepRecord) -> list[Entry]:
    state = record.result if isinstance(record.result, dict) else {}
    opened = timestamp(state.get("opened_at"))
    channels = _channels(record.name)
    title = _label(channels)
    deadline = timestamp(state.get("deadline"))
    until = f"deadline {deadline:%Y-%m-%d %H:%M:%S UTC}" if deadline else ""
    seq = record.seq
    entries = [
        Entry(
            opened or record.at,
            "wait",
            f"{title} opened",
            "waiting",
            detail=until,
            seq=seq,
            channels=channels,
            until=deadline,
        )
    ]
    if not record.done:
        return entries
    took = _between(opened, record.at)
    if state.get("timed_out"):
        title = f"{title} timed out"
        entries.append(
            Entry(record.at, "answered", title, "timed_out", took, seq=seq, channels=channels)
        )
        return entries
    answers = state.get("answers") or {}
    given = [a for a in answers.values() if isinstance(a, dict)]
    who = sorted({str(a["by"]) for a in given if a.get("by")})
    decisions = [d for d in (_decision(a) for a in given) if d]
    payloads = [a.get("payload") for a in given]
    entries.append(
        Entry(
            record.at,
            "answered",
            f"{title} answered",
            "rejected" if "reject" in decisions else "completed",
            took,
            by=", ".join(who) or None,
            decision=", ".join(decisions) or None,
            data=payloads[0] if len(payloads) == 1 else payloads,
            seq=seq,
            channels=channels,
        )
    )
    return entries


def _sleep(record: StepRecord, busy_since: datetime | None) -> list[Entry]:
    state = record.result if isinstance(record.result, dict) else {}
    until = timestamp(state.get("until"))
    words = f"until {until:%Y-%m-%d %H:%M:%S UTC}" if until else ""
    if not record.done:
        return [
            Entry(
                record.at, "sleep", "sleeping", "waiting", detail=words, seq=record.seq, until=until
            )
        ]
    took = _between(busy_since, until)
    return [
        Entry(
            until or record.at,
            "slept",
            "slept",
            "completed",
            took,
            detail=words,
            seq=record.seq,
            until=until,
        )
    ]


_EVENT_TITLES: Final = {
    "created": "started",
    "answer": "answer received",
    "vote": "vote cast",
    "signal": "signal received",
    "cancel_requested": "cancel requested",
    "run_retry": "run retried",
    "wait_timed_out": "wait timed out",
    "terminated": "terminated",
}


def _event(event: HistoryEvent) -> Entry:
    data = event.data if isinstance(event.data, dict) else {}
    by = str(data["by"]) if data.get("by") else None
    at = event.at
    if event.type == "ended":
        word = str(data.get("status") or "ended")
        failed = data.get("error") is not None and word != "completed"
        detail = error_text(data.get("error"), word) if failed else ""
        title = f"ended {word.replace('_', ' ')}"
        return Entry(at, "ended", title, word, detail=detail, event=event)
    if event.type == "created":
        return Entry(at, "created", "started", "running", by=by, event=event)
    if event.type == "terminated":
        detail = short(data) if data else ""
        return Entry(at, "ended", "terminated", "terminated", by=by, detail=detail, event=event)
    rest = {k: v for k, v in data.items() if k not in ("by", "key") and v not in (None, {}, [])}
    title = _EVENT_TITLES.get(event.type, event.type.replace("_", " "))
    if event.type == "signal" and data.get("name"):
        title = f"signal {data['name']}"
        rest.pop("name", None)
    if event.type == "run_retry":
        return Entry(at, "event", title, "retrying", detail=_error(data), event=event)
    detail = short(", ".join(f"{k} {short(v)}" for k, v in rest.items())) if rest else ""
    group = "cancelled" if event.type == "cancel_requested" else "event"
    return Entry(at, "event", title, group, by=by, detail=detail, event=event)


def _answered_channel(event: HistoryEvent) -> str | None:
    """An answer event's wait channel (`kind:name`), read from its wait key."""
    key = event.data.get("key") if isinstance(event.data, dict) else None
    if not isinstance(key, str):
        return None
    parts = key.split(":")
    return f"{parts[1]}:{parts[2]}" if len(parts) >= 4 else None


def _record_entries(record: StepRecord, busy_since: datetime | None, resumed: bool) -> list[Entry]:
    if record.kind in QUIET_KINDS or record.name.startswith(DAG_INTERNAL):
        return []
    if record.kind in ("step", "transaction"):
        return [_step(record, busy_since, resumed)]
    if record.kind == "wait":
        return _wait(record)
    if record.kind == "sleep":
        return _sleep(record, busy_since)
    title = _step_title(record)
    detail = short(record.result)
    return [Entry(record.at, record.kind, title, "completed", detail=detail, seq=record.seq)]


def _row_end(row: ExecutionRow) -> Entry:
    """The end of a run that has no `ended` event (it ended another way), from its row."""
    failed = row.error is not None and row.status != "completed"
    detail = error_text(row.error, row.status) if failed else ""
    word = row.status.replace("_", " ")
    return Entry(row.ended_at, "ended", f"ended {word}", row.status, detail=detail)


def page(
    row: ExecutionRow,
    events: Sequence[HistoryEvent],
    records: Sequence[StepRecord],
    limit: int | None = PAGE,
    before: Cursor | None = None,
    *,
    answers: bool = False,
) -> Page:
    """One page of the timeline from at most `limit + 1` of the newest events and of the
    newest records before `before` (as `history_page` and `steps_page` read them).

    The newest `limit` of those events and records are the page (a wait's opening shows with
    its answer); the cursor of the page before it starts below the oldest of each kind kept.
    `limit` None: every event and record given, the run's whole timeline when they are all of
    its history. `answers`: keep each answer event, even where its wait's entry says who
    answered."""
    events = sorted(events, key=lambda e: e.event_id)
    ordered = sorted(records, key=lambda r: r.seq)
    start = row.admitted_at or row.created_at
    items: list[tuple[datetime, int, HistoryEvent | StepRecord]] = [
        (e.at, n, e) for n, e in enumerate(events)
    ]
    items += [(r.at or start, len(events) + n, r) for n, r in enumerate(ordered)]
    items.sort(key=lambda t: (t[0], t[1]))
    kept = [item for _, _, item in (items if limit is None else items[-limit:])]
    kept_events = [i for i in kept if isinstance(i, HistoryEvent)]
    kept_records = [i for i in kept if isinstance(i, StepRecord)]
    kept_seqs = {r.seq for r in kept_records}

    entries: list[Entry] = []
    answered: set[str] = set()
    # Durations run from the call before: the record read before it; for the first record
    # read, the run's start when every record before the cursor was read (it is the run's
    # first call), else unknown.
    busy_since: datetime | None = start if limit is None or len(ordered) <= limit else None
    resumed = True
    for record in ordered:
        if record.seq in kept_seqs:
            entries.extend(_record_entries(record, busy_since, resumed))
            if record.kind == "wait" and record.done:
                answered.update(record.name.split(","))
        if record.done and record.at is not None:
            result = record.result if isinstance(record.result, dict) else {}
            until = timestamp(result.get("until")) if record.kind == "sleep" else None
            busy_since = until or record.at
            resumed = record.kind in ("wait", "sleep")
    for event in kept_events:
        if not answers and event.type == "answer" and _answered_channel(event) in answered:
            continue
        entries.append(_event(event))
    if row.ended_at is not None and before is None and not any(e.kind == "ended" for e in entries):
        entries.append(_row_end(row))
    order = {id(e): n for n, e in enumerate(entries)}
    entries.sort(key=lambda e: (e.at or start, order[id(e)]))
    more = limit is not None and (len(items) > limit or len(events) > limit or len(ordered) > limit)
    if not more:
        return Page(tuple(entries), None)
    old = before or Cursor(None, None)
    event_id = min((e.event_id for e in kept_events), default=old.event_id)
    seq = min(kept_seqs, default=old.seq)
    return Page(tuple(entries), Cursor(event_id, seq))
