"""`tether runs show --history` (the runtime's timeline, listed by cli/render.py) over real
runs: steps with their attempts and how long they took, sleeps, waits with who answered them,
the events, a DAG run's step statuses, and the same lines in `--json`. Our choice."""

from __future__ import annotations

import argparse
import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.console import Console

from tether.cli import render, runs
from tether.cli.output import Output
from tether.cli.render import dag_steps
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


async def show_json(rt: Runtime, run: str) -> Any:
    """What `tether runs --json show RUN --history` prints."""
    out = io.StringIO()
    args = argparse.Namespace(id=run, history=True)
    assert await runs._show(args, rt.ops, Output(True, file=out)) is None
    return orjson.loads(out.getvalue())


async def test_the_timeline_shows_attempts_sleeps_and_who_answered(start: Start) -> None:
    async with start(app) as rt:
        run = (await rt.ops.start("story", "k", by="ann")).execution.id
        parked = await rt.ops.wait_until(run, lambda r: bool(r.waits), timeout=TIMEOUT)
        (wait,) = parked.current.waits
        await rt.ops.answer(run, wait["key"], {"decision": "approve"}, by="bob")
        await rt.ops.wait_for_end(run, timeout=TIMEOUT)
        row, events, records = await history(rt, run)
        shown = await show_json(rt, run)
    entries = render.timeline_lines(row, events, records)
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
    assert shown["timeline"] == [
        {
            "at": e.at.isoformat() if e.at else None,
            "what": e.what,
            "took_s": e.took,
            "took_at_most": e.bound,
            "detail": e.detail,
        }
        for e in entries
    ]
    assert shown["timeline"][0] == {
        "at": events[0].at.isoformat(),
        "what": "created",
        "took_s": None,
        "took_at_most": False,
        "detail": "by ann",
    }


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
    whats = [e.what for e in render.timeline_lines(row, events, records)]
    assert whats[1:3] == ["step first", "step second"]  # the DAG's own records show nothing
    assert not any("dag:" in what for what in whats)
