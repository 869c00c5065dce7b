"""What a WorkflowEnvironment hands a test to assert on: a run, its open waits, its history
and its recorded steps, as plain frozen dataclasses."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tether.runtime.rows import ExecutionRow, HistoryEvent, StepRecord


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


@dataclass(frozen=True)
class OpenWait:
    """A wait a run has open: what `ctx.approval`, `ctx.human_task`, `ctx.wait_for_signal`,
    `ctx.agent_step` (or an update, or a child run) asked for.

    `key` answers exactly this wait (a wait open again after the run moved on has a new key);
    `kind` is `approval`, `human_task`, `signal`, `agent_step`, `update` or `child`; `schema`
    is the JSON Schema an answer must fit; `inputs` / `required` an approval's named inputs.
    """

    key: str
    kind: str
    name: str
    prompt: str | None
    schema: Mapping[str, Any]
    opened_at: datetime | None
    deadline: datetime | None
    inputs: tuple[str, ...] = ()
    required: tuple[str, ...] = ()

    @classmethod
    def from_descriptor(cls, d: Mapping[str, Any]) -> OpenWait:
        return cls(
            key=d["key"],
            kind=d["kind"],
            name=d["name"],
            prompt=d.get("prompt"),
            schema=d.get("schema") or {},
            opened_at=_time(d.get("opened_at")),
            deadline=_time(d.get("deadline")),
            inputs=tuple(d.get("inputs") or ()),
            required=tuple(d.get("required") or ()),
        )


@dataclass(frozen=True)
class RunInfo:
    """One run as stored now.

    `status`: pending, running, waiting, completed, failed, timed_out, cancelled, terminated
    or continued_as_new. `waits`: the waits open while it is `waiting` (a durable sleep is
    `waiting` with none). `output` is the stored (JSON) result of a completed run, `error` the
    recorded error of one that did not complete. `details` is what the workflow last set with
    `ctx.set_details`. `attempt` counts the claims of the run by a worker (it grows when a
    worker dies and another resumes the run); `run_attempt` counts the workflow's own retries.
    """

    id: str
    workflow: str
    business_id: str
    status: str
    details: str | None
    waits: tuple[OpenWait, ...]
    output: Any
    error: Any
    created_at: datetime
    ended_at: datetime | None
    wake_at: datetime | None
    attempt: int
    run_attempt: int
    predecessor_id: str | None
    successor_id: str | None

    @property
    def live(self) -> bool:
        """Whether the run has not ended."""
        return self.ended_at is None and self.status in ("pending", "running", "waiting")

    @classmethod
    def from_row(cls, row: ExecutionRow) -> RunInfo:
        return cls(
            id=row.id,
            workflow=row.workflow,
            business_id=row.business_id,
            status=row.status,
            details=row.details,
            waits=tuple(OpenWait.from_descriptor(d) for d in row.waits),
            output=row.output,
            error=row.error,
            created_at=row.created_at,
            ended_at=row.ended_at,
            wake_at=row.wake_at,
            attempt=row.attempt,
            run_attempt=row.run_attempt,
            predecessor_id=row.predecessor_id,
            successor_id=row.successor_id,
        )


@dataclass(frozen=True)
class Event:
    """One event of a run's history, oldest first by `id`.

    `type` is, among others: `created` (data: how the run was started), `answer` (`key`,
    `by`), `signal` (`name`, `by`), `cancel_requested`, `wait_timed_out` (`waits`), `run_retry`
    (the error that made the workflow retry), `update_completed` / `update_failed` (an update's
    handler ran), `child_ended`, `terminated`, and `ended` (`status`, `error`: the last event
    of a run that ended by itself). `at` is the database's time, which a skipping clock moves.
    """

    id: int
    type: str
    data: Any
    at: datetime

    @classmethod
    def from_row(cls, row: HistoryEvent) -> Event:
        return cls(row.event_id, row.type, row.data, row.at)


@dataclass(frozen=True)
class Step:
    """One recorded durable call of a run, by position (`seq`) in the workflow body.

    `kind` is `step`, `transaction`, `sleep`, `wait`, `now` or `uuid`; `name` the step's
    name (the function's qualified name unless `name=` was given). `done` is false while the
    call is open (a sleep or wait not over, a step between retries). `result` is what replay
    returns, as stored: `{"value": …}` for a step, `{"error": …, "failures": n}` after its last
    failed try.
    """

    seq: int
    kind: str
    name: str
    result: Any
    done: bool

    @classmethod
    def from_record(cls, record: StepRecord) -> Step:
        return cls(record.seq, record.kind, record.name, record.result, record.done)
