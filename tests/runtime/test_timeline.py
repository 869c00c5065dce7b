"""A run's timeline (pure): what each entry says, where it sits and how long it took, and
paging through a long history."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from tether.runtime import timeline
from tether.runtime.rows import ExecutionRow, HistoryEvent, StepRecord
from tether.runtime.timeline import Cursor, span
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


def test_spans_read_like_speech() -> None:
    """Our choice: a duration in the largest two units that say it."""
    assert [span(s) for s in (0.25, 9.44, 185, 7800, 3 * 86400 + 3600, 86400)] == [
        "250 ms",
        "9.4 s",
        "3 min 5 s",
        "2 h 10 min",
        "3 days 1 h",
        "1 day 0 h",
    ]


def test_an_entry_says_how_long_it_took_and_how_many_attempts() -> None:
    """Our choice: an upper bound reads `≤`; an unknown duration or count reads as nothing."""
    step = timeline.Entry(T0, "step", "step x", "completed", 1.5, True, attempts=3)
    assert (step.took_text(), step.attempts_text()) == ("≤ 1.5 s", "3 attempts")
    once = timeline.Entry(T0, "step", "step x", "completed", 0.25, attempts=1)
    assert (once.took_text(), once.attempts_text()) == ("250 ms", "1 attempt")
    event = timeline.Entry(T0, "event", "signal go", "event")
    assert (event.took_text(), event.attempts_text()) == ("", "")


def test_quiet_calls_and_dag_bookkeeping_show_nothing_but_mark_where_the_run_was() -> None:
    """Our choice: a recorded value or a DAG's own record is not work the run did, but the
    step after it started from there, so its span is not an upper bound."""
    shell = {"value": {"exit_code": 0, "stdout": "ok\n"}}
    records = [
        StepRecord(1, "transaction", "dag:spec", {"value": {"steps": []}}, True, _at(1)),
        StepRecord(2, "uuid", "uuid", "u-1", True, _at(4)),
        StepRecord(3, "step", "node:build", shell, True, _at(6)),
    ]
    entries = timeline.page(_row(), [], records).entries
    assert [(e.title, e.took, e.bound, e.detail) for e in entries] == [
        ("step build", 2.0, False, "ok")
    ]


def test_a_call_read_without_its_time_sits_at_the_run_start() -> None:
    """Our choice: records written before their time was kept are the oldest of the run."""
    records = [
        StepRecord(1, "step", "old", {"value": 1}, True, None),
        StepRecord(2, "step", "new", {"value": 2}, True, _at(5)),
    ]
    events = [_event(1, "created", 0), _event(2, "signal", 3, name="go")]
    entries = timeline.page(_row(), events, records).entries
    assert [(e.title, e.at) for e in entries] == [
        ("step old", None),
        ("started", T0),
        ("signal go", _at(3)),
        ("step new", _at(5)),
    ]


def test_a_call_and_an_event_at_the_same_moment_show_the_call_first() -> None:
    """Our choice: a worker writes a run's last call and its end in one transaction."""
    records = [StepRecord(1, "step", "last", {"value": 1}, True, _at(2))]
    ended = _row(status="completed", ended_at=_at(2))
    events = [_event(1, "created", 0), _event(2, "ended", 2, status="completed", error=None)]
    entries = timeline.page(ended, events, records).entries
    assert [e.title for e in entries] == ["started", "step last", "ended completed"]


def test_the_whole_value_comes_with_an_entry_only_when_its_line_does_not_show_it_all() -> None:
    """Our choice: a short scalar is its own line; a structure, a cut line or a DAG step's
    output (shown instead of its value) carry the whole value."""
    long = "x" * 500
    shell = {"exit_code": 0, "stdout": "done"}
    values = [7, "ok", None, {}, {"a": 1}, [1], long, shell]
    records = [
        StepRecord(n, "step", f"s{n}", {"value": v}, True, _at(n)) for n, v in enumerate(values, 1)
    ]
    entries = timeline.page(_row(), [], records).entries
    assert [e.data for e in entries] == [None, None, None, None, {"a": 1}, [1], long, shell]
    assert [e.detail for e in entries][:4] == ["7", "ok", "", "{}"]


def test_a_whole_timeline_can_keep_every_answer_event() -> None:
    """Our choice: with no limit the page is the whole run; `answers` keeps each answer
    event beside its wait's entries, for a list of every event."""
    wait = {"opened_at": _at(8.5).isoformat(), "answers": {"approval:go": {"by": "bob"}}}
    records = [StepRecord(n, "step", f"s{n}", {"value": n}, True, _at(n)) for n in range(2, 9)]
    records.append(StepRecord(9, "wait", "approval:go", wait, True, _at(10)))
    events = [_event(1, "created", 0), _event(2, "answer", 9.5, by="bob", key="ex_a:approval:go:1")]
    whole = timeline.page(_row(), events, records, limit=None, answers=True)
    assert whole.earlier is None
    assert [e.title for e in whole.entries] == [
        "started",
        *(f"step s{n}" for n in range(2, 9)),
        "approval go opened",
        "answer received",
        "approval go answered",
    ]
    assert whole.entries[1].took == 2.0  # from the run's start: every record was read
    paged = timeline.page(_row(), events, records)
    assert "answer received" not in [e.title for e in paged.entries]
