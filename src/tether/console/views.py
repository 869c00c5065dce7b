"""What the console's pages show of a run (PURE): status symbols and words, timeline entries,
step rows, and the DAG view of a run. The templates render these; no I/O here.

Status is always a symbol and a word, besides its colour (the stylesheet colours the class).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import orjson

from tether.console.graph import Layout, layout
from tether.runtime.dag.replay import fold
from tether.runtime.dag.status import RunDetail, dag_status
from tether.runtime.rows import ExecutionRow, HistoryEvent, StepRecord
from tether.runtime.watching import answerable_waits

SYMBOLS: Final = {
    "pending": "…",
    "queued": "…",
    "not_started": "○",
    "running": "▶",
    "waiting": "‖",
    "completed": "✓",
    "succeeded": "✓",
    "partially_succeeded": "◐",
    "failed": "✗",
    "rejected": "⊘",
    "timed_out": "⏱",
    "cancelled": "■",
    "terminated": "■",
    "aborted": "■",
    "skipped": "↷",
    "retrying": "↻",
    "continued_as_new": "→",
}
#: Status words the stylesheet colours by (class `st-<group>`).
GROUPS: Final = {
    "completed": "ok",
    "succeeded": "ok",
    "partially_succeeded": "warn",
    "failed": "bad",
    "rejected": "bad",
    "timed_out": "bad",
    "waiting": "wait",
    "running": "run",
    "retrying": "run",
}
MAX_TEXT: Final = 4000


@dataclass(frozen=True)
class Status:
    word: str
    symbol: str
    group: str


def status(word: str) -> Status:
    return Status(word.replace("_", " "), SYMBOLS.get(word, "•"), GROUPS.get(word, "idle"))


def pretty(value: Any, limit: int = MAX_TEXT) -> str:
    """A JSON value as indented text, cut at `limit` characters."""
    if value is None:
        return ""
    try:
        text = orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + "\n… (cut)"


def stamp(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S UTC") if at is not None else ""


@dataclass(frozen=True)
class TimelineEntry:
    event_id: int
    type: str
    at: str
    data: str


def timeline(events: Sequence[HistoryEvent]) -> list[TimelineEntry]:
    return [
        TimelineEntry(e.event_id, e.type.replace("_", " "), stamp(e.at), pretty(e.data, 600))
        for e in events
    ]


@dataclass(frozen=True)
class StepRow:
    name: str
    kind: str
    status: Status
    detail: str  # the result, or a DAG step's logs / error
    retries: int = 0


def step_rows(records: Sequence[StepRecord], dag: RunDetail | None) -> list[StepRow]:
    """A row per step: a DAG's steps with Dagu's statuses and logs, else each recorded step."""
    if dag is not None:
        return [
            StepRow(
                s.name,
                "dag step",
                status(s.status_label),
                "\n".join(p for p in (s.error or "", s.stdout, s.stderr) if p)[:MAX_TEXT],
                s.retry_count,
            )
            for s in dag.steps
        ]
    return [
        StepRow(r.name, r.kind, status("completed" if r.done else "running"), pretty(r.result, 800))
        for r in records
        if not r.name.startswith("dag:")
    ]


@dataclass(frozen=True)
class DagView:
    detail: RunDetail
    graph: Layout


def dag_view(row: ExecutionRow, records: Sequence[StepRecord]) -> DagView | None:
    """The DAG view of a run (None: the run is not a DAG run)."""
    state, _ = fold(records)
    if state is None:
        return None
    detail = dag_status(row, records)
    depends = {s.name: s.depends for s in state.dag.steps}
    statuses = {s.name: s.status_label for s in detail.steps}
    return DagView(detail, layout(state.dag.order, depends, statuses))


def waiting_for_answer(row: ExecutionRow) -> bool:
    """Whether the run is parked on a wait a person (or agent) answers."""
    return bool(answerable_waits(row))
