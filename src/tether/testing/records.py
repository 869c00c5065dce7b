"""What a WorkflowEnvironment hands a test to assert on: a run, its open waits, its history
and its recorded steps, as plain frozen dataclasses (built from the runtime's rows by the
functions at the end, which the environment calls)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tether.runtime.rows import ExecutionRow, HistoryEvent, StepRecord


@dataclass(frozen=True)
class OpenWait:
    """A wait a run has open: what `ctx.approval`, `ctx.human_task`, `ctx.wait_for_signal` or
    `ctx.agent_step` asked for (or an update or a child run it waits on).

    Attributes:
        key: answers exactly this wait (a wait opened again after the run moved on has a new
            key).
        kind: `approval`, `human_task`, `signal`, `agent_step`, `update` or `child`.
        name: the name the workflow gave it.
        prompt: the prompt it shows, if any.
        schema: the JSON Schema an answer must fit.
        opened_at: when it was first opened (the environment's clock).
        deadline: when it times out (None: never).
        inputs: an approval's named inputs.
        required: the inputs an approval needs to be approved.
    """

    key: str
    """Answers exactly this wait (a wait opened again after the run moved on has a new key)."""
    kind: str
    """`approval`, `human_task`, `signal`, `agent_step`, `update` or `child`."""
    name: str
    """The name the workflow gave it."""
    prompt: str | None
    """The prompt it shows, if any."""
    schema: Mapping[str, Any]
    """The JSON Schema an answer must fit."""
    opened_at: datetime | None
    """When it was first opened (the environment's clock)."""
    deadline: datetime | None
    """When it times out (None: never)."""
    inputs: tuple[str, ...] = ()
    """An approval's named inputs."""
    required: tuple[str, ...] = ()
    """The inputs an approval needs to be approved."""


@dataclass(frozen=True)
class RunInfo:
    """One run as stored now.

    Attributes:
        id: the run's id.
        workflow: its workflow's name.
        business_id: the caller-facing id its chain shares.
        status: `pending`, `running`, `waiting`, `completed`, `failed`, `timed_out`,
            `cancelled`, `terminated` or `continued_as_new`.
        details: what the workflow last set with `ctx.set_details`.
        waits: the waits open while it is `waiting` (a durable sleep is `waiting` with none).
        output: the stored (JSON) result of a completed run.
        error: the recorded error of a run that did not complete.
        created_at: when it was started (the environment's clock).
        ended_at: when it ended (None while live).
        wake_at: when a worker takes it next (a timer, a deadline, a backoff, a lease's end).
        attempt: how many times a worker claimed it (it grows when a worker dies and another
            resumes the run).
        run_attempt: how many times the workflow ran from its start (its own retries).
        predecessor_id: the run it continues or retries, if any.
        successor_id: the run that continues or retries it, if any.
    """

    id: str
    """The run's id."""
    workflow: str
    """Its workflow's name."""
    business_id: str
    """The caller-facing id its chain shares."""
    status: str
    """`pending`, `running`, `waiting`, `completed`, `failed`, `timed_out`, `cancelled`,
    `terminated` or `continued_as_new`."""
    details: str | None
    """What the workflow last set with `ctx.set_details`."""
    waits: tuple[OpenWait, ...]
    """The waits open while it is `waiting` (a durable sleep is `waiting` with none)."""
    output: Any
    """The stored (JSON) result of a completed run."""
    error: Any
    """The recorded error of a run that did not complete."""
    created_at: datetime
    """When it was started (the environment's clock)."""
    ended_at: datetime | None
    """When it ended (None while live)."""
    wake_at: datetime | None
    """When a worker takes it next (a timer, a deadline, a backoff, a lease's end)."""
    attempt: int
    """How many times a worker claimed it (it grows when a worker dies and another resumes the
    run)."""
    run_attempt: int
    """How many times the workflow ran from its start (its own retries)."""
    predecessor_id: str | None
    """The run it continues or retries, if any."""
    successor_id: str | None
    """The run that continues or retries it, if any."""

    @property
    def live(self) -> bool:
        """Whether the run has not ended."""
        return self.ended_at is None and self.status in ("pending", "running", "waiting")


@dataclass(frozen=True)
class Event:
    """One event of a run's history.

    Attributes:
        id: its position, from 1, oldest first.
        type: among others `created` (data: how the run was started), `answer` (`key`,
            `by`), `signal` (`name`, `by`), `cancel_requested`, `wait_timed_out` (`waits`),
            `run_retry` (the error that made the workflow retry), `update_completed` /
            `update_failed`, `child_ended`, `terminated`, and `ended` (`status`, `error`:
            the last event of a run that ended by itself).
        data: what the event carries (a JSON object).
        at: when it happened: the database's time, which a skipping clock moves.
    """

    id: int
    """Its position, from 1, oldest first."""
    type: str
    """Among others `created` (data: how the run was started), `answer` (`key`, `by`), `signal`
    (`name`, `by`), `cancel_requested`, `wait_timed_out` (`waits`), `run_retry` (the error that made
    the workflow retry), `update_completed` / `update_failed`, `child_ended`, `terminated`, and
    `ended` (`status`, `error`: the last event of a run that ended by itself)."""
    data: Any
    """What the event carries (a JSON object)."""
    at: datetime
    """When it happened: the database's time, which a skipping clock moves."""


@dataclass(frozen=True)
class Step:
    """One recorded durable call of a run.

    Attributes:
        seq: its position in the workflow body, from 1.
        kind: `step`, `transaction`, `sleep`, `wait`, `now` or `uuid`.
        name: a step's name (`name=`, else its function's qualified name); the kind for the
            others.
        result: what replay returns, as stored: `{"value": …}` for a step (with
            `"failures": n` when it succeeded after n failed tries), `{"error": …,
            "failures": n}` after its last failed try.
        done: false while the call is open (a sleep or wait not over, a step between tries).
    """

    seq: int
    """Its position in the workflow body, from 1."""
    kind: str
    """`step`, `transaction`, `sleep`, `wait`, `now` or `uuid`."""
    name: str
    """A step's name (`name=`, else its function's qualified name); the kind for the others."""
    result: Any
    """What replay returns, as stored: `{"value": …}` for a step (with `"failures": n` when it
    succeeded after n failed tries), `{"error": …, "failures": n}` after its last failed try."""
    done: bool
    """False while the call is open (a sleep or wait not over, a step between tries)."""


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def open_wait(d: Mapping[str, Any]) -> OpenWait:
    """An open wait from the descriptor a run's row lists."""
    return OpenWait(
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


def run_info(row: ExecutionRow) -> RunInfo:
    """A run's info from its row."""
    return RunInfo(
        id=row.id,
        workflow=row.workflow,
        business_id=row.business_id,
        status=row.status,
        details=row.details,
        waits=tuple(open_wait(d) for d in row.waits),
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


def event(row: HistoryEvent) -> Event:
    """A history event from its row."""
    return Event(row.event_id, row.type, row.data, row.at)


def step(record: StepRecord) -> Step:
    """A step record from the runtime's."""
    return Step(record.seq, record.kind, record.name, record.result, record.done)
