"""`tether runs show --history` (cli/timeline.py, rendered by cli/render.py) over real runs:
steps with their attempts and how long they took, sleeps, waits with who answered them, the
events, and a DAG run's step statuses. Our choice."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tether.cli import render
from tether.cli.timeline import Entry, dag_steps, span, timeline
from tether.runtime.context import Context
from tether.runtime.policy import RetryPolicy
from tether.runtime.registry import App
from tether.runtime.service import Runtime
from tether.runtime.waits import Approved

from .conftest import Start

pytestmark = pytest.mark.postgres

TIMEOUT = 20.0
app = App("history")
tries: dict[str, int] = {}


def flaky(key: str) -> str:
    tries[key] = tries.get(key, 0) + 1
    if tries[key] < 3:
        raise ConnectionError("not yet")
    return "ok"


@app.workflow
async def story(ctx: Context, key: str) -> bool:
    """A step that succeeds on its third try, a sleep, then an approval."""
    await ctx.step(flaky, key, retry=RetryPolicy(max_attempts=5, initial_interval=0.0))
    await ctx.sleep(0.05)
    decision = await ctx.approval("ship", prompt="Ship it?")
    return isinstance(decision, Approved)


def plain(renderable: Any) -> str:
    console = Console(width=render.PLAIN_WIDTH, no_color=True, highlight=False)
    with console.capture() as captured:
        console.print(renderable)
    return captured.get()


async def history(rt: Runtime, run: str) -> tuple[Any, ...]:
    row = (await rt.ops.get(run)).current
    return row, await rt.ops.history(run), await rt.ops.steps(run)


async def test_the_timeline_shows_attempts_sleeps_and_who_answered(start: Start) -> None:
    async with start(app) as rt:
        run = (await rt.ops.start("story", "k", by="ann")).execution.id
        parked = await rt.ops.wait_until(run, lambda r: bool(r.waits), timeout=TIMEOUT)
        (wait,) = parked.current.waits
        await rt.ops.answer(run, wait["key"], {"decision": "approve"}, by="bob")
        await rt.ops.wait_for_end(run, timeout=TIMEOUT)
        row, events, records = await history(rt, run)
    entries = timeline(row, events, records)
    whats = [e.what for e in entries]
    assert whats == [
        "created",
        "step flaky",
        "sleep",
        "answer",
        "wait approval 'ship'",
        "ended completed",
    ]
    step, sleep, answered = entries[1], entries[2], entries[4]
    assert step.detail == "3 attempts → ok" and step.bound and step.took is not None
    assert sleep.took is not None and sleep.took >= 0.05
    assert answered.detail == "answered by bob: approve" and answered.took is not None
    assert entries[0].detail == "by ann"
    assert [e.at for e in entries] == sorted(e.at for e in entries if e.at is not None)
    text = plain(render.show(row, datetime.now(UTC), fancy=False, history=(events, records)))
    header = next(line for line in text.splitlines() if line.startswith("AT"))
    assert header.split() == ["AT", "TOOK", "WHAT", "DETAIL"]
    assert "≤ " in text and "3 attempts" in text and "DAG" not in text


DAG = """
name: two
steps:
  - name: first
    command: "true"
  - name: second
    command: "exit 3"
    depends: first
"""


async def test_a_dag_run_lists_its_steps_with_their_statuses(start: Start, tmp_path: Path) -> None:
    dags = App()
    (tmp_path / "two.yaml").write_text(DAG, encoding="utf-8")
    assert dags.load_dags(tmp_path) == {}
    async with start(dags) as rt:
        run = (await rt.ops.start("two", {})).execution.id
        await rt.ops.wait_for_end(run, timeout=TIMEOUT)
        row, events, records = await history(rt, run)
    steps = dag_steps(row, records)
    assert [(s.name, s.status_label) for s in steps] == [
        ("first", "succeeded"),
        ("second", "failed"),
    ]
    text = plain(render.show(row, datetime.now(UTC), fancy=False, history=(events, records)))
    lines = text.splitlines()
    assert lines.index(
        next(x for x in lines if x.split() == ["STEP", "STATUS", "RETRIES", "DETAIL"])
    )
    assert any(x.split()[:3] == ["second", "failed", "0"] for x in lines)


def test_spans_read_like_speech() -> None:
    assert [span(s) for s in (0.25, 9.44, 185, 7800, 3 * 86400 + 3600)] == [
        "250 ms",
        "9.4 s",
        "3 min 5 s",
        "2 h 10 min",
        "3 days 1 h",
    ]


def test_an_entry_without_a_time_goes_last() -> None:
    """A record read without its time (older servers' rows) still shows, after the rest."""
    at = datetime(2026, 5, 1, tzinfo=UTC)
    assert Entry(None, "x").at is None and Entry(at, "y").at == at
