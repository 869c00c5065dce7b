"""What the `runs` commands print. Pure: rows and a clock in, rich renderables out.

Two styles from the same code: `fancy` (a terminal: colours, boxes, local and relative times)
and plain (pipes, files, tests: no colour, no box, ISO times, a fixed width), so scripts that
read plain output see the same text every time. Every status is shown as its word; colour
only repeats it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tether.runtime import hints, timeline
from tether.runtime.chain import error_text
from tether.runtime.dag.status import StepDetail, dag_status
from tether.runtime.rows import ExecutionRow, HistoryEvent, StepRecord
from tether.runtime.timeline import Entry, short, span, took_text
from tether.runtime.watching import answerable_waits

PLAIN_WIDTH = 200
STATUS_STYLE = {
    "pending": "cyan",
    "running": "bold blue",
    "waiting": "bold yellow",
    "completed": "bold green",
    "failed": "bold red",
    "timed_out": "red",
    "cancelled": "magenta",
    "terminated": "magenta",
    "continued_as_new": "dim",
}


def row_dict(row: ExecutionRow) -> dict[str, Any]:
    """A run as the `--json` output shows it."""
    return {
        "id": row.id,
        "workflow": row.workflow,
        "business_id": row.business_id,
        "status": row.status,
        "version": row.version,
        "details": row.details,
        "waits": row.waits,
        "output": row.output,
        "error": row.error,
        "successor_id": row.successor_id,
        "queue": row.queue,
        "labels": dict(row.labels),
        "tenant": row.tenant,
        "created_at": row.created_at.isoformat(),
        "ended_at": row.ended_at.isoformat() if row.ended_at else None,
    }


@dataclass(frozen=True)
class Line:
    """A timeline entry as `runs show --history` lists it."""

    at: datetime | None
    what: str
    took: float | None = None  # seconds, where known
    detail: str = ""
    bound: bool = False  # `took` also holds the wait for a worker: at most this long


def timeline_lines(
    row: ExecutionRow, events: Sequence[HistoryEvent], records: Sequence[StepRecord]
) -> list[Line]:
    """The run's whole timeline (runtime/timeline.py), a line per entry: each event as it was
    written (answers too), and each wait once, at its answer (at its opening while open)."""
    entries = timeline.page(row, events, records, limit=None, answers=True).entries
    answered = {e.seq for e in entries if e.kind == "answered"}
    return [_line(e) for e in entries if not (e.kind == "wait" and e.seq in answered)]


def _line(entry: Entry) -> Line:
    what, detail = _words(entry)
    return Line(entry.at, what, entry.took, detail, entry.bound)


def _words(e: Entry) -> tuple[str, str]:
    """What an entry is, and what came of it: an event by its type and fields, a call by its
    kind and name."""
    if e.event is not None and e.event.type != "ended":
        data = e.event.data if isinstance(e.event.data, dict) else {}
        rest = [
            f"{k} {v if isinstance(v, str) else short(v)}"
            for k, v in data.items()
            if k != "by" and v not in (None, {}, [])
        ]
        by = f"by {data['by']}" if data.get("by") else ""
        return e.event.type.replace("_", " "), short(", ".join([by, *rest]).strip(", "))
    if e.kind == "ended":
        return f"ended {e.status}", e.detail
    if e.kind in ("wait", "answered"):
        label = ", ".join(f"{kind} {name!r}" if name else kind for kind, name in e.channels)
        if e.kind == "wait":
            detail = "open" + (f", deadline {e.until.isoformat()}" if e.until else "")
        elif e.status == "timed_out":
            detail = "timed out"
        else:
            detail = "answered" + (f" by {e.by}" if e.by else "")
            detail += f": {e.decision}" if e.decision else ""
        return f"wait {label}", short(detail)
    if e.kind in ("sleep", "slept"):
        return "sleep", f"until {e.until.isoformat()}" if e.kind == "sleep" and e.until else ""
    if e.kind == "step" and e.status == "failed":
        return e.title, f"failed, {e.attempts_text()}: {e.detail}"
    if e.kind == "step" and e.status == "completed":
        return e.title, e.attempts_text() + (f" → {e.detail}" if e.detail else "")
    return e.title, e.detail


def entry_dict(line: Line) -> dict[str, Any]:
    """A timeline line as the `--json` output shows it."""
    return {
        "at": line.at.isoformat() if line.at else None,
        "what": line.what,
        "took_s": line.took,
        "took_at_most": line.bound,
        "detail": line.detail,
    }


def dag_steps(row: ExecutionRow, records: Sequence[StepRecord]) -> tuple[StepDetail, ...]:
    """A DAG run's steps with their statuses (empty for any other run)."""
    return dag_status(row, records).steps


def dag_step_dict(step: StepDetail) -> dict[str, Any]:
    """A DAG step as the `--json` output shows it."""
    return {
        "name": step.name,
        "status": step.status_label,
        "retries": step.retry_count,
        "error": step.error,
        "exit_code": step.exit_code,
    }


def status_text(status: str) -> Text:
    return Text(status, style=STATUS_STYLE.get(status, ""))


def relative(at: datetime, now: datetime) -> str:
    """`5 s ago`, `3 min ago`, `in 2 h`, `4 days ago`."""
    seconds = (now - at).total_seconds()
    past = seconds >= 0
    s = abs(seconds)
    if s < 1:
        return "just now"
    if s < 60:
        amount = f"{int(s)} s"
    elif s < 3600:
        amount = f"{int(s // 60)} min"
    elif s < 86400:
        amount = f"{int(s // 3600)} h"
    else:
        days = int(s // 86400)
        amount = f"{days} day{'s' if days != 1 else ''}"
    return f"{amount} ago" if past else f"in {amount}"


def when(at: datetime | None, now: datetime, fancy: bool) -> str:
    """A time as a person reads it (local, and how long ago) or as a script does (ISO)."""
    if at is None:
        return ""
    if not fancy:
        return at.isoformat()
    local = at.astimezone()
    shown = (
        local.strftime("%H:%M:%S")
        if local.date() == now.astimezone().date()
        else (local.strftime("%Y-%m-%d %H:%M"))
    )
    return f"{shown} ({relative(at, now)})"


def open_waits(row: ExecutionRow) -> list[dict[str, Any]]:
    """The waits a person (or agent) can answer, while the run is parked on them."""
    return answerable_waits(row)


def outcome(row: ExecutionRow) -> str:
    """How an ended run ended, in a phrase: how long it took, its error, its successor."""
    took = span((row.ended_at - row.created_at).total_seconds()) if row.ended_at else ""
    if row.status == "completed":
        return f"done in {took}" if took else "done"
    if row.status == "continued_as_new":
        return f"continued by {row.successor_id}" if row.successor_id else "continued"
    if row.error is not None:
        return error_text(row.error, row.status)
    return f"{row.status} after {took}" if took else row.status


def _names(waits: Iterable[dict[str, Any]]) -> str:
    return ", ".join(f"{w.get('kind')} {w.get('name')!r}" for w in waits)


def activity(
    row: ExecutionRow,
    now: datetime,
    fancy: bool,
    *,
    answered: list[dict[str, Any]] | None = None,
) -> str:
    """One phrase for what the run is doing now, or how it ended: the wait it is parked on,
    when it wakes, the workflow's details while it runs. An ended run's last details are not
    what it does now, nor are details set before a wait that has since been answered
    (`answered`: those waits, while the run's details are still the ones it parked with)."""
    if not row.live:
        return outcome(row)
    waits = open_waits(row)
    if waits:
        return f"waiting for {_names(waits)}"
    if answered:
        return f"answered {_names(answered)}; resuming"
    if row.status == "waiting" and row.wake_at is not None:
        return f"sleeping until {when(row.wake_at, now, fancy)}"
    if row.status == "pending" and row.wake_at is not None and row.wake_at > now:
        return f"retrying at {when(row.wake_at, now, fancy)}"
    if row.details:
        return row.details
    if row.status == "pending":
        return "queued" if row.attempt == 0 else "resuming"
    return row.status


def answer_hint(row: ExecutionRow, wait: dict[str, Any]) -> str:
    """How to answer `wait` from the command line (the runtime's shared hint: the wait's name
    when it is unique among the open waits, else its key)."""
    return hints.cli_hint(row, wait)


def runs_table(rows: Iterable[ExecutionRow], now: datetime, fancy: bool) -> Table:
    table = Table(
        box=box.SIMPLE_HEAD if fancy else None,
        show_edge=False,
        header_style="bold" if fancy else "",
        pad_edge=False,
    )
    for name in ("ID", "WORKFLOW", "STATUS", "CREATED", "DETAILS"):
        table.add_column(name, no_wrap=name != "DETAILS", overflow="fold")
    for row in rows:
        table.add_row(
            row.id,
            row.workflow,
            status_text(row.status),
            when(row.created_at, now, fancy),
            activity(row, now, fancy),
        )
    return table


def _json(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def wait_block(row: ExecutionRow, wait: dict[str, Any], now: datetime, fancy: bool) -> Text:
    """An open wait: its kind and name, prompt, required inputs, deadline, key, and the
    command that answers it."""
    text = Text()
    text.append(f"{wait.get('kind')} ", style="bold yellow" if fancy else "")
    text.append(repr(wait.get("name")), style="bold" if fancy else "")
    if wait.get("prompt"):
        text.append(f" — {wait['prompt']}")
    if wait.get("required"):
        text.append(f"\n  required: {', '.join(wait['required'])}")
    if wait.get("deadline"):
        text.append(f"\n  deadline: {wait['deadline']}")
    text.append(f"\n  key: {wait.get('key')}")
    text.append("\n  answer: ")
    text.append(answer_hint(row, wait), style="green" if fancy else "")
    return text


def run_detail(
    row: ExecutionRow, now: datetime, fancy: bool, *, resolved_from: str | None = None
) -> RenderableType:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold" if fancy else "", no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("run", row.id)
    if resolved_from:
        grid.add_row("resolved from", resolved_from)
    grid.add_row("workflow", row.workflow)
    if row.business_id != row.id:
        grid.add_row("business id", row.business_id)
    grid.add_row("status", status_text(row.status))
    grid.add_row("created", when(row.created_at, now, fancy))
    if row.ended_at:
        grid.add_row("ended", when(row.ended_at, now, fancy))
    if row.details:
        grid.add_row("details" if row.live else "last details", row.details)
    doing = activity(row, now, fancy) if row.live else ""
    if doing and doing != row.details:
        grid.add_row("now", doing)
    if row.cancel_requested and row.live:
        grid.add_row("cancel", "requested (it ends at its next durable call)")
    if row.predecessor_id:
        grid.add_row("follows", row.predecessor_id)
    if row.successor_id:
        grid.add_row("continued by", row.successor_id)
    if row.output is not None:
        grid.add_row("output", _json(row.output))
    if row.error is not None:
        grid.add_row("error", Text(_json(row.error), style="red" if fancy else ""))
    for wait in open_waits(row) if row.live else []:
        grid.add_row("open wait", wait_block(row, wait, now, fancy))
    return grid


def timeline_table(lines: Iterable[Line], now: datetime, fancy: bool) -> Table:
    """`runs show --history`: the run's events and recorded calls as they happened."""
    table = Table(
        box=box.SIMPLE_HEAD if fancy else None,
        show_edge=False,
        header_style="bold" if fancy else "",
        pad_edge=False,
        title="timeline" if fancy else None,
    )
    table.add_column("AT", no_wrap=True)
    table.add_column("TOOK", justify="right", no_wrap=True)
    table.add_column("WHAT", no_wrap=True)
    table.add_column("DETAIL", overflow="fold")
    for line in lines:
        took = took_text(line.took, line.bound)
        table.add_row(when(line.at, now, fancy), took, line.what, line.detail)
    return table


def dag_table(steps: Iterable[StepDetail], fancy: bool) -> Table:
    """A DAG run's steps: each one's status, retries and what it left (error or exit code)."""
    table = Table(
        box=box.SIMPLE_HEAD if fancy else None,
        show_edge=False,
        header_style="bold" if fancy else "",
        pad_edge=False,
        title="DAG steps" if fancy else None,
    )
    for name in ("STEP", "STATUS", "RETRIES", "DETAIL"):
        table.add_column(name, no_wrap=name != "DETAIL", overflow="fold")
    for step in steps:
        detail = step.error or (f"exit {step.exit_code}" if step.exit_code is not None else "")
        table.add_row(step.name, step.status_label, str(step.retry_count), detail)
    return table


def show(
    row: ExecutionRow,
    now: datetime,
    fancy: bool,
    *,
    resolved_from: str | None = None,
    history: tuple[list[HistoryEvent], list[StepRecord]] | None = None,
) -> RenderableType:
    """`runs show`: the run, then (`history`: its events and recorded calls) its DAG steps
    when it is a DAG run, and its timeline."""
    parts: list[RenderableType] = [run_detail(row, now, fancy, resolved_from=resolved_from)]
    if history is not None:
        events, records = history
        steps = dag_steps(row, records)
        if steps:
            parts += [Text(""), dag_table(steps, fancy)]
        parts += [Text(""), timeline_table(timeline_lines(row, events, records), now, fancy)]
    return Group(*parts)
