"""The run page's timeline (pure): what each entry says, and paging through a long history."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from tether.console import timeline
from tether.console.timeline import Cursor
from tether.runtime.rows import ExecutionRow, HistoryEvent, StepRecord
from tether.storage.rows import _EXECUTION_FIELDS

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _row(**changes: Any) -> ExecutionRow:
    values: dict[str, Any] = dict.fromkeys(_EXECUTION_FIELDS)
    values.update(
        id="ex_a", workflow="wf", business_id="ex_a", status="running", version=1,
        last_event_id=1, waits=[], cancel_requested=False, root_id="ex_a", created_at=T0,
        updated_at=T0, attempt=1, run_attempt=1, lost_leases=0, labels={},
    )  # fmt: skip
    return replace(ExecutionRow.from_record(values), **changes)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _event(event_id: int, type_: str, seconds: float, **data: Any) -> HistoryEvent:
    return HistoryEvent(event_id, type_, data, _at(seconds))


def test_a_step_that_succeeded_after_failed_tries_shows_its_attempts_as_an_upper_bound() -> None:
    """Our choice: attempts from the record's failures; the span holds the backoff, so `≤`."""
    records = [
        StepRecord(1, "step", "fast", {"value": 1}, True, _at(2)),
        StepRecord(2, "step", "flaky", {"value": 2, "failures": 2}, True, _at(5)),
    ]
    entries = timeline.page(_row(), [_event(1, "created", 0, by="alice")], records).entries
    assert [(e.title, e.attempts, e.took, e.bound) for e in entries] == [
        ("started", None, None, False),
        ("step fast", 1, 2.0, True),  # the run waited for a worker before its first call
        ("step flaky", 3, 3.0, True),
    ]
    assert entries[0].by == "alice"


def test_a_wait_shows_when_it_opened_and_who_answered_with_what() -> None:
    """Our choice: a wait is two entries; the answer event it consumed is not a third."""
    wait = {
        "opened_at": _at(1).isoformat(),
        "deadline": None,
        "answers": {"approval:publish": {"by": "bob", "payload": {"decision": "approve"}}},
    }
    records = [StepRecord(1, "wait", "approval:publish", wait, True, _at(61))]
    events = [
        _event(1, "created", 0),
        _event(2, "answer", 60, by="bob", key="ex_a:approval:publish:1"),
    ]
    entries = timeline.page(_row(), events, records).entries
    assert [(e.title, e.by, e.decision, e.took) for e in entries] == [
        ("started", None, None, None),
        ("approval publish opened", None, None, None),
        ("approval publish answered", "bob", "approve", 60.0),
    ]


def test_an_open_sleep_says_until_when_and_an_ended_run_shows_its_end() -> None:
    """Our choice: a sleep not over yet reads `sleeping until …`."""
    until = _at(300)
    records = [StepRecord(1, "sleep", "sleep", {"until": until.isoformat()}, False, _at(1))]
    live = timeline.page(_row(status="waiting"), [], records).entries
    assert [(e.title, e.detail) for e in live] == [("sleeping", "until 2026-01-02 03:09:05 UTC")]
    error = {"type": "Boom", "message": "no"}
    ended = _row(status="failed", ended_at=_at(9), error=error)
    events = [_event(1, "ended", 9, status="failed", error=error)]
    assert [(e.title, e.detail) for e in timeline.page(ended, events, []).entries] == [
        ("ended failed", "Boom: no")
    ]


def _pages(
    row: ExecutionRow, events: list[HistoryEvent], records: list[StepRecord], limit: int
) -> list[tuple[timeline.Entry, ...]]:
    """Every page, newest first, read as the run page reads them (limit + 1 before a cursor)."""
    out = []
    cursor: Cursor | None = None
    while True:
        before_event = cursor.event_id if cursor and cursor.event_id is not None else 10**9
        before_seq = cursor.seq if cursor and cursor.seq is not None else 10**9
        ev = sorted((e for e in events if e.event_id < before_event), key=lambda e: -e.event_id)
        rec = sorted((r for r in records if r.seq < before_seq), key=lambda r: -r.seq)
        shown = timeline.page(row, ev[: limit + 1], rec[: limit + 1], limit, cursor)
        assert len(shown.entries) <= limit + 1  # a wait's opening may come with its answer
        out.append(shown.entries)
        if shown.earlier is None:
            return out
        assert shown.earlier != cursor  # every page moves on
        cursor = Cursor.parse(shown.earlier.text())


def test_paging_a_long_history_shows_every_entry_once_in_order() -> None:
    """Our choice: a long run is read a bounded page at a time, and the pages add up to it."""
    events = [_event(1, "created", 0)]
    events += [_event(n, "signal", n, name="poke", by="x") for n in range(2, 40)]
    records = [
        StepRecord(s, "step", f"s{s}", {"value": s}, True, _at(s + 0.5)) for s in range(1, 30)
    ]
    records.append(StepRecord(30, "uuid", "uuid", "u", True, _at(31.5)))  # shows nothing
    pages = _pages(_row(), events, records, limit=7)
    assert len(pages) > 5
    seen = [e.title for page in reversed(pages) for e in page]
    expected = ["started"]
    for n in range(1, 40):
        if n >= 2:
            expected.append("signal poke")
        if n < 30:
            expected.append(f"step s{n}")
    assert seen == expected


def test_a_cursor_that_is_not_one_reads_as_none() -> None:
    """Our choice: a hand-edited `earlier=` shows the newest page, never an error."""
    assert Cursor.parse("12.7") == Cursor(12, 7)
    assert Cursor.parse(".7") == Cursor(None, 7)
    assert Cursor.parse(Cursor(None, None).text()) == Cursor(None, None)
    for junk in ("", "x", "1", "1.x", "-1.2", "1.2.3", "9" * 30 + ".1"):
        assert Cursor.parse(junk) is None, junk
