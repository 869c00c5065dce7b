"""Dagu's run and step statuses, derived from an execution row and its recorded steps (pure).

`dag_status(row, steps)` folds the recorded results through the same state machine the
interpreter used (`state.DagState`), so the read model never disagrees with the run. The
numbers and labels are Dagu's: run 0 not_started … 8 rejected;
a step uses 5 for skipped and adds 9 retrying.

`attemptId`: each start, retry (a new execution), resume after a decision and push-back
records a fresh id (a recorded `uuid` call); the current one is the last recorded. It lives
in the run's recorded steps, which every read of a run's detail loads with the row, rather
than in a new column that every write path would have to keep in step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from tether.runtime.dag.replay import fold
from tether.runtime.dag.state import STOPPED, DagState
from tether.storage.rows import ExecutionRow, StepRecord

RUN_STATUSES: Final[Mapping[str, int]] = {
    "not_started": 0,
    "running": 1,
    "failed": 2,
    "aborted": 3,
    "succeeded": 4,
    "queued": 5,
    "partially_succeeded": 6,
    "waiting": 7,
    "rejected": 8,
}
STEP_STATUSES: Final[Mapping[str, int]] = {
    **{k: v for k, v in RUN_STATUSES.items() if k != "queued"},
    "skipped": 5,
    "retrying": 9,
}
TERMINAL: Final = frozenset({2, 3, 4, 6, 8})
ACTIVE: Final = frozenset({1, 5, 7})


@dataclass(frozen=True)
class StepDetail:
    name: str
    id: str | None
    status: int
    status_label: str
    error: str | None = None
    retry_count: int = 0
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    truncated: bool = False
    sub_runs: tuple[str, ...] = ()
    decision: Mapping[str, Any] = field(default_factory=dict)
    push_back_iteration: int = 0
    push_back_history: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class RunDetail:
    name: str
    dag_run_id: str
    execution_id: str
    attempt_id: str | None
    status: int
    status_label: str
    started_at: datetime | None
    finished_at: datetime | None
    params: Any
    steps: tuple[StepDetail, ...]
    waiting: tuple[Mapping[str, Any], ...] = ()  # the open approval / human-task waits


def dag_status(
    row: ExecutionRow,
    steps: Sequence[StepRecord],
    pending: Mapping[str, Mapping[str, Any]] | None = None,
) -> RunDetail:
    """The Dagu view of a DAG run: run status and each step's status, in execution order.
    `pending`: answers the run holds unconsumed, by wait channel (see `fold`)."""
    state, open_waits = fold(steps, pending)
    if state is not None:
        _rejected_in_the_answers_write(row, state, open_waits)
    label = _run_label(row, state)
    details = () if state is None else _steps(row, state, open_waits)
    waiting = tuple(w for w in row.waits if w.get("kind") in ("approval", "human_task"))
    return RunDetail(
        name=state.dag.name if state is not None else row.workflow,
        dag_run_id=row.business_id,
        execution_id=row.id,
        attempt_id=state.attempts[-1] if state is not None and state.attempts else None,
        status=RUN_STATUSES[label],
        status_label=label,
        started_at=row.created_at,
        finished_at=row.ended_at,
        params=(row.input or {}).get("params") if isinstance(row.input, dict) else None,
        steps=details,
        waiting=waiting,
    )


def _rejected_in_the_answers_write(
    row: ExecutionRow, state: DagState, open_waits: set[str]
) -> None:
    """A rejection ends its run in the write that answers the gate (`answer_rules.answer_effect`):
    the run never replays it, so its records still show the gate waiting. The row's error says
    which gate, why and who: the gate reads rejected, as the run would have recorded it."""
    error = row.error if isinstance(row.error, dict) else {}
    gate = error.get("gate")
    if (row.sealed_from or row.status) != "failed" or error.get("kind") != "rejected":
        return
    if not isinstance(gate, str) or gate not in state.nodes:
        return
    if state.nodes[gate].status == "waiting":
        reject = {"decision": "reject", "reason": error.get("reason")}
        state.record_answer(gate, reject, error.get("by"))
        open_waits.discard(gate)


def _run_label(row: ExecutionRow, state: DagState | None) -> str:
    status = row.sealed_from or row.status
    if status in ("pending", "running", "waiting"):
        if state is None and row.attempt == 0:
            return "queued"
        asking = any(w.get("kind") in ("approval", "human_task") for w in row.waits)
        return "waiting" if status == "waiting" and asking else "running"
    if status == "completed":
        out = row.output if isinstance(row.output, dict) else {}
        return str(out.get("status", "succeeded"))
    if status == "failed":
        kind = row.error.get("kind") if isinstance(row.error, dict) else None
        return "rejected" if kind == "rejected" else "failed"
    if status == "timed_out":
        return "failed"
    return "aborted"  # cancelled, terminated


def _steps(row: ExecutionRow, state: DagState, open_waits: set[str]) -> tuple[StepDetail, ...]:
    live = row.status in ("pending", "running", "waiting")
    # `ready` also marks the steps behind a skipped step skipped (as the interpreter did when
    # it ran), which the recorded results alone do not say; an ended run settles its end.
    ready: set[str] = set()
    if live:
        can_run = set(state.ready())
        ready = can_run if row.status != "waiting" else set()
    else:
        state.settle_end(stopped=(row.sealed_from or row.status) in STOPPED)
    out = []
    for name in state.dag.order:
        node, step = state.nodes[name], state.by_name[name]
        label: str = node.status
        if name in open_waits or (label == "waiting"):
            label = "waiting" if live else "aborted"
        elif name in ready and label == "not_started":
            label = "running"
        elif label == "running" and not live:
            label = "aborted"
        result = node.result or {}
        out.append(
            StepDetail(
                name=name,
                id=step.id,
                status=STEP_STATUSES[label],
                status_label=label,
                error=result.get("error") if label in ("failed", "retrying", "aborted") else None,
                retry_count=node.retries,
                exit_code=result.get("exit_code"),
                stdout=result.get("stdout", ""),
                stderr=result.get("stderr", ""),
                truncated=bool(result.get("truncated")),
                sub_runs=(node.child_id,) if node.child_id else (),
                decision=node.decision,
                push_back_iteration=node.iteration,
                push_back_history=tuple(node.history),
            )
        )
    return tuple(out)
