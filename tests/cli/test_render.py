"""What `runs list/show` print, pure: rows and a clock in, text out."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from rich.console import Console

from tether.cli import render
from tether.storage.rows import ExecutionRow

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def row(**fields: Any) -> ExecutionRow:
    base = ExecutionRow(
        id="ex_a",
        workflow="document_review",
        business_id="ex_a",
        status="waiting",
        version=3,
        last_event_id=2,
        input={},
        output=None,
        error=None,
        waits=[],
        details=None,
        cancel_requested=False,
        idempotency_key=None,
        predecessor_id=None,
        successor_id=None,
        root_id="ex_a",
        sealed_from=None,
        retention_s=None,
        created_at=NOW - timedelta(minutes=3),
        updated_at=NOW,
        ended_at=None,
        expires_at=None,
        wake_at=None,
        deadline_at=None,
        lease_owner=None,
        lease_until=None,
        attempt=0,
        run_attempt=0,
    )
    return replace(base, **fields)


def text(renderable: Any) -> str:
    console = Console(width=render.PLAIN_WIDTH, no_color=True, highlight=False)
    with console.capture() as captured:
        console.print(renderable)
    return captured.get()


APPROVAL = {
    "key": "ex_a:approval:publish:2",
    "kind": "approval",
    "name": "publish",
    "prompt": "Publish?",
    "required": ["ticket"],
}


def test_relative_times_read_like_speech() -> None:
    assert render.relative(NOW - timedelta(seconds=5), NOW) == "5 s ago"
    assert render.relative(NOW - timedelta(minutes=3), NOW) == "3 min ago"
    assert render.relative(NOW + timedelta(hours=2), NOW) == "in 2 h"
    assert render.relative(NOW - timedelta(days=1), NOW) == "1 day ago"


def test_plain_times_are_iso_and_fancy_ones_local_and_relative() -> None:
    at = NOW - timedelta(minutes=3)
    assert render.when(at, NOW, fancy=False) == at.isoformat()
    assert render.when(at, NOW, fancy=True).endswith("(3 min ago)")


def test_the_list_shows_status_words_and_what_each_run_waits_for() -> None:
    """Each status is written out (never colour alone); a waiting run names its wait, a
    sleeping one when it wakes, an ended one how it ended."""
    waiting = row(waits=[APPROVAL])
    sleeping = row(id="ex_b", wake_at=NOW + timedelta(hours=1))
    done = row(id="ex_c", status="completed", details="step 2/2", ended_at=NOW)
    out = text(render.runs_table([waiting, sleeping, done], NOW, fancy=False))
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "WORKFLOW", "STATUS", "CREATED", "DETAILS"]
    assert "waiting for approval 'publish'" in lines[1]
    assert f"sleeping until {(NOW + timedelta(hours=1)).isoformat()}" in lines[2]
    assert "completed" in lines[3] and "done in 3 min 0 s" in lines[3]


def test_an_ended_run_shows_how_it_ended_not_its_last_details() -> None:
    """A run's details are its progress while it runs: once it has ended, the list and the
    watch say how it ended (a line such as "waiting for approval" set before its last wait
    would read as if it still waited). Our choice."""
    stale = "round 2: waiting for approval of T"
    completed = row(status="completed", details=stale, ended_at=NOW)
    failed = row(
        status="failed",
        details=stale,
        ended_at=NOW,
        error={"type": "StepFailed", "message": "step 'x' failed: boom"},
    )
    cancelled = row(status="cancelled", details=stale, ended_at=NOW - timedelta(minutes=1))
    assert render.activity(completed, NOW, fancy=False) == "done in 3 min 0 s"
    assert render.activity(failed, NOW, fancy=False) == "StepFailed: step 'x' failed: boom"
    assert render.activity(cancelled, NOW, fancy=False) == "cancelled after 2 min 0 s"
    shown = text(render.show(completed, NOW, fancy=False))
    assert f"last details  {stale}" in shown and "now " not in shown


def test_a_live_run_shows_its_wait_sleep_retry_or_details() -> None:
    """Parked on an answer: the wait (not the details set before it); sleeping or backing off
    before a retry: until when; otherwise the workflow's own details."""
    later = NOW + timedelta(seconds=30)
    assert render.activity(row(waits=[APPROVAL], details="round 1"), NOW, False) == (
        "waiting for approval 'publish'"
    )
    retrying = row(status="pending", wake_at=later, attempt=1, details="x")
    assert render.activity(retrying, NOW, False) == f"retrying at {later.isoformat()}"
    assert render.activity(row(status="running", details="step 3/5"), NOW, False) == "step 3/5"
    assert render.activity(row(status="pending"), NOW, False) == "queued"
    assert render.activity(row(status="pending", attempt=2), NOW, False) == "resuming"


def test_show_names_the_open_wait_its_key_and_how_to_answer_it() -> None:
    out = text(render.show(row(waits=[APPROVAL], details="round 1"), NOW, fancy=False))
    assert "approval 'publish' — Publish?" in out
    assert "required: ticket" in out and "key: ex_a:approval:publish:2" in out
    assert (
        """answer: tether runs answer ex_a publish """
        """'{"decision":"approve","ticket":"..."}'"""
    ) in out


def test_show_names_the_chain() -> None:
    out = text(render.show(row(predecessor_id="ex_p", successor_id="ex_s"), NOW, fancy=False))
    assert "follows       ex_p" in out and "continued by  ex_s" in out


def test_an_ended_run_shows_no_open_wait_or_activity() -> None:
    ended = row(status="failed", waits=[APPROVAL], error={"message": "boom"}, ended_at=NOW)
    out = text(render.show(ended, NOW, fancy=False))
    assert "open wait" not in out and "now " not in out and '"boom"' in out
