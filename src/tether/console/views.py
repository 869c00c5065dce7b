"""What the console's pages show of a run (PURE): status symbols and words, times and
durations, a DAG's step rows, and the DAG view of a run (its timeline's entries come from
runtime/timeline.py, their statuses styled by `status`). The templates render these; no I/O
here.

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
from tether.runtime.rows import ExecutionRow, StepRecord
from tether.runtime.timeline import span
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


def iso(at: datetime | None) -> str:
    """A `<time datetime>` value."""
    return at.isoformat() if at is not None else ""


def duration(row: ExecutionRow, now: datetime) -> str:
    """How long the run took (ended), or has been going (live), from its creation."""
    end = row.ended_at or now
    seconds = max((end - row.created_at).total_seconds(), 0.0)
    return span(seconds)


def breadcrumb(row: ExecutionRow) -> str:
    """The run's progress line while it is live; an ended run's last line is stale (it said
    what the run was doing then), so none."""
    return row.details or "" if row.live else ""


@dataclass(frozen=True)
class StepRow:
    name: str
    kind: str
    status: Status
    detail: str  # the result, or a DAG step's logs / error
    retries: int = 0


def step_rows(dag: RunDetail) -> list[StepRow]:
    """A row per DAG step, with Dagu's statuses and its logs."""
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
