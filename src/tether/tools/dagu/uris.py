"""`dagu://` URIs (pure): the run and logs URIs the tool and resources use, their parser, and
the predicate that says which run changes a subscriber of a run URI is told about.

For the push engineer's `notifications/resources/updated` hook:
- `parse_run_uri(uri)` → `RunRef(name, dag_run_id)` or None (not a run URI of ours);
- `resolve.resolve_run_uri(ops, uri)` (tools/dagu/resolve.py) → the execution id it names;
- `notifies(row)` → whether this state of the run is worth a notification: a terminal state, or
  a waiting checkpoint (waiting on an approval gate or a human task).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote

from tether.runtime.rows import ExecutionRow

SCHEME: Final = "dagu://"
REFERENCES: Final = (
    "dagu://reference/authoring",
    "dagu://reference/tools",
    "dagu://reference/notifications",
)
CHECKPOINT_KINDS: Final = frozenset({"approval", "human_task"})
_RUN: Final = re.compile(
    r"^dagu://runs/(?P<name>[^/]+)/(?P<id>[^/]+)(?P<part>/logs|/steps/(?P<step>[^/]+)/logs)?$"
)
_DAG: Final = re.compile(r"^dagu://dags(?:/(?P<name>[^/]+))?$")


@dataclass(frozen=True)
class RunRef:
    name: str
    dag_run_id: str
    part: str | None = None  # None: the run; "logs": its logs; "step": one step's log
    step: str | None = None


def _seg(text: str) -> str:
    return quote(text, safe="")


def run_uri(name: str, dag_run_id: str) -> str:
    return f"{SCHEME}runs/{_seg(name)}/{_seg(dag_run_id)}"


def logs_uri(name: str, dag_run_id: str) -> str:
    return f"{run_uri(name, dag_run_id)}/logs"


def step_logs_uri(name: str, dag_run_id: str, step: str) -> str:
    return f"{run_uri(name, dag_run_id)}/steps/{_seg(step)}/logs"


def parse_run_uri(uri: str) -> RunRef | None:
    """A `dagu://runs/…` URI's parts (percent-decoded); None for any other URI."""
    m = _RUN.match(uri)
    if m is None:
        return None
    part = m.group("part")
    kind = None if part is None else ("logs" if part == "/logs" else "step")
    step = unquote(m.group("step")) if m.group("step") else None
    return RunRef(unquote(m.group("name")), unquote(m.group("id")), kind, step)


def parse_dag_uri(uri: str) -> tuple[bool, str | None] | None:
    """`dagu://dags` → (True, None); `dagu://dags/NAME` → (True, NAME); else None."""
    m = _DAG.match(uri)
    if m is None:
        return None
    name = m.group("name")
    return True, unquote(name) if name else None


def notifies(row: ExecutionRow) -> bool:
    """Whether a subscriber of this run's URI is told about this state: the run ended, or it
    stopped at a waiting checkpoint (an open approval gate or human task). A waiting status
    with no such wait (a timer, a sub-run) is not a checkpoint."""
    if row.ended_at is not None or not row.live:
        return True
    return row.status == "waiting" and any(w.get("kind") in CHECKPOINT_KINDS for w in row.waits)
