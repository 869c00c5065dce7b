"""Where a watch stops: the one decision the `<wf>_watch` tool and `tether runs watch` share.
Pure: a function of the chain's live run.

A watch goes on across everything a run does by itself — steps, durable sleeps and timers,
retry backoff, child runs, continue-as-new (the handle follows the chain) — and stops at the
end, or at a wait only the caller can answer (signal, approval, human task, agent step).
"""

from __future__ import annotations

from typing import Literal

from tether.runtime.answer_rules import ANSWERABLE_KINDS
from tether.runtime.statuses import ENDED_STATUSES
from tether.storage.rows import ExecutionRow

Stop = Literal["ended", "needs_answer"]


def answerable_waits(row: ExecutionRow) -> list[dict[str, object]]:
    """The run's open waits that the caller answers (none unless it is parked)."""
    if row.status != "waiting":
        return []
    return [w for w in row.waits if w.get("kind") in ANSWERABLE_KINDS]


def watch_stop(row: ExecutionRow) -> Stop | None:
    """ "ended" at a terminal state, "needs_answer" when parked on a wait the caller answers,
    else None: keep watching (running, pending, sleeping, backing off, waiting on a child)."""
    if row.status in ENDED_STATUSES:
        return "ended"
    if answerable_waits(row):
        return "needs_answer"
    return None
