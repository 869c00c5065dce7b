"""Frozen rows built at the storage edge from asyncpg records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal, get_args

import asyncpg

from tether.storage import sealing

RecordLike = Mapping[str, Any] | asyncpg.Record

Status = Literal[
    "pending",
    "running",
    "waiting",
    "completed",
    "failed",
    "timed_out",
    "cancelled",
    "terminated",
    "continued_as_new",
]
STATUSES: tuple[str, ...] = get_args(Status)
LIVE_STATUSES: frozenset[str] = frozenset({"pending", "running", "waiting"})
#: The statuses that end a run: the one definition, which the queries read too (a checkpoint
#: that sets one ends the run: `ended_statuses` in storage/queries.py).
ENDED_STATUSES: frozenset[str] = frozenset(STATUSES) - LIVE_STATUSES


@dataclass(frozen=True)
class ExecutionRow:
    """One run: the single source of truth for its task view."""

    id: str
    workflow: str
    business_id: str
    status: Status
    version: int
    last_event_id: int
    input: Any
    output: Any
    error: Any
    waits: list[dict[str, Any]]
    details: str | None
    cancel_requested: bool
    idempotency_key: str | None
    predecessor_id: str | None
    successor_id: str | None
    root_id: str
    sealed_from: str | None
    retention_s: int | None
    created_at: datetime
    updated_at: datetime
    ended_at: datetime | None
    expires_at: datetime | None
    wake_at: datetime | None
    deadline_at: datetime | None
    lease_owner: str | None
    lease_until: datetime | None
    attempt: int
    run_attempt: int
    lost_leases: int = 0  # leases lost in a row while running it (poison-run guard)
    queue: str | None = None  # the admission queue it runs on (None: admitted at once)
    admitted_at: datetime | None = None  # when it left its queue (None while queued)
    labels: Mapping[str, str] = field(default_factory=dict)  # key → value ("" key-only)
    profile: str | None = None  # the runtime profile it was started with
    profile_env: Mapping[str, str] | None = None  # that profile's env, as it was at start
    tenant: str | None = None  # the tenant it belongs to (None: no tenant)

    # With encryption on: the stored envelopes of `input`/`output` (which hold the plaintext),
    # for readers the read gate does not admit (runtime/payloads.py). None: nothing sealed.
    sealed: Mapping[str, Any] | None = None
    # While tracing: the W3C `traceparent` stored with the run when it was created (its
    # `created` event), which a traced claim reads along (repo.claim). None otherwise.
    traceparent: str | None = field(default=None, compare=False)

    @property
    def queued(self) -> bool:
        """Waiting in its queue for a slot (Dagu's `queued`): never claimed yet."""
        return self.queue is not None and self.admitted_at is None and self.ended_at is None

    @property
    def live(self) -> bool:
        return self.status in LIVE_STATUSES

    @classmethod
    def from_record(
        cls, record: RecordLike, *, unseal: bool = True, traced: bool = False
    ) -> ExecutionRow:
        """The row; with a key ring installed and `unseal`, its sealed input and output
        opened (raises PayloadUnreadable). `unseal=False` leaves them as stored. `traced`: the
        record also has the run's `traceparent` (a traced claim's)."""
        # On the hot path of every read (tasks/get): fill the frozen instance directly instead
        # of going through the generated __init__ with keyword arguments (≈ 9 µs a row).
        row = object.__new__(cls)
        # zip/map instead of a comprehension: the per-field loop runs in C (35 fields).
        values = map(record.__getitem__, _EXECUTION_FIELDS)
        row.__dict__.update(zip(_EXECUTION_FIELDS, values, strict=True))
        if traced:
            row.__dict__["traceparent"] = record["traceparent"]
        if sealing.RINGS and unseal:  # encryption off: this one check is all it costs
            _unseal_execution(row.__dict__, sealing.RINGS[-1])
        return row


_EXECUTION_FIELDS = tuple(
    f.name for f in fields(ExecutionRow) if f.name not in ("sealed", "traceparent")
)


def _unseal_execution(values: dict[str, Any], ring: sealing.KeyRing | None) -> None:
    """Open a row's sealed input and output in place, keeping the envelopes in `sealed`."""
    stored: dict[str, Any] = {}
    for column, context in (
        ("input", sealing.execution_input),
        ("output", sealing.execution_output),
    ):
        value = values[column]
        if sealing.is_envelope(value):
            stored[column] = value
            values[column] = sealing.unseal(ring, value, context(values["id"]))
    if stored:
        values["sealed"] = stored


def unsealed(row: ExecutionRow) -> ExecutionRow:
    """`row` with its payloads opened, also when no ring is installed (then an envelope raises
    UnknownKey): what a worker runs must never be an envelope. Raises PayloadUnreadable."""
    if row.sealed is not None or not (
        sealing.is_envelope(row.input) or sealing.is_envelope(row.output)
    ):
        return row
    opened = object.__new__(ExecutionRow)
    opened.__dict__.update(row.__dict__)
    _unseal_execution(opened.__dict__, sealing.ring())
    return opened


@dataclass(frozen=True)
class Lease:
    """A run inserted already claimed (`insert_claimed`): held by worker `owner` for `lease_s`
    seconds, as a claim would hold it."""

    owner: str
    lease_s: float


@dataclass(frozen=True)
class NewExecution:
    """A run to insert (`repo.insert_execution`)."""

    id: str
    workflow: str
    business_id: str
    input: Any
    idempotency_key: str | None = None
    predecessor_id: str | None = None
    root_id: str | None = None
    retention_s: int | None = None
    deadline_at: datetime | None = None
    created_data: dict[str, Any] = field(default_factory=dict)
    queue: str | None = None  # set: the run is inserted queued (see admit)
    labels: Mapping[str, str] = field(default_factory=dict)
    profile: str | None = None
    profile_env: Mapping[str, str] | None = None
    tenant: str | None = None  # the tenant of the principal that started it (successors inherit)

    @classmethod
    def following(
        cls,
        old: ExecutionRow,
        *,
        id: str,
        business_id: str,
        input: Any,
        deadline_at: datetime | None,
        created_data: dict[str, Any],
        workflow: str | None = None,
        retention_s: int | None = None,
    ) -> NewExecution:
        """The run that follows `old` (a retry, a rerun, a continue-as-new) in its chain: it
        keeps `old`'s root, labels, profile and tenant. Without `workflow` it is `old`'s
        workflow with `old`'s retention and queue; with one (continue-as-new), it has that
        workflow's `retention_s` (None: kept forever) and keeps the queue only when the
        workflow is `old`'s own, so a run cannot leave its queue by continuing as new."""
        same = workflow is None or workflow == old.workflow
        return cls(
            id=id,
            workflow=workflow or old.workflow,
            business_id=business_id,
            input=input,
            predecessor_id=old.id,
            root_id=old.root_id,
            retention_s=old.retention_s if workflow is None else retention_s,
            deadline_at=deadline_at,
            created_data=created_data,
            queue=old.queue if same else None,
            labels=old.labels,
            profile=old.profile,
            profile_env=old.profile_env,
            tenant=old.tenant,
        )


@dataclass(frozen=True)
class HistoryEvent:
    event_id: int
    type: str
    data: Any
    at: datetime

    @classmethod
    def from_record(cls, record: RecordLike) -> HistoryEvent:
        return cls(record["event_id"], record["type"], record["data"], record["at"])


@dataclass(frozen=True)
class StepRecord:
    seq: int
    kind: str
    name: str
    result: Any
    done: bool
    # When the record was last written (a step's result, a sleep's or wait's end); None where
    # the query does not read it (replay needs no times).
    at: datetime | None = field(default=None, compare=False)

    @classmethod
    def from_mapping(cls, m: RecordLike, execution_id: str = "") -> StepRecord:
        """The record, its result opened when sealed (`execution_id` names its place).
        Raises PayloadUnreadable."""
        result = m["result"]
        if sealing.is_envelope(result):
            where = sealing.step_result(execution_id, m["seq"])
            result = sealing.unseal(sealing.ring(), result, where)
        at = m.get("at")
        return cls(
            m["seq"],
            m["kind"],
            m["name"],
            result,
            m["done"],
            at if isinstance(at, datetime) else None,
        )


@dataclass(frozen=True)
class BufferedSignal:
    id: int
    channel: str
    key: str | None
    payload: Any
    by: str | None

    @classmethod
    def from_mapping(cls, m: RecordLike, execution_id: str = "") -> BufferedSignal:
        """The signal, its payload opened when sealed. Raises PayloadUnreadable."""
        payload = m["payload"]
        if sealing.is_envelope(payload):
            where = sealing.signal_payload(execution_id, m["channel"], m["key"])
            payload = sealing.unseal(sealing.ring(), payload, where)
        return cls(m["id"], m["channel"], m["key"], payload, m["by"])


@dataclass(frozen=True)
class PendingUpdate:
    id: str
    name: str
    input: Any

    @classmethod
    def from_mapping(cls, m: RecordLike, execution_id: str = "") -> PendingUpdate:
        """The update, its input opened when sealed. Raises PayloadUnreadable."""
        value = m["input"]
        if sealing.is_envelope(value):
            where = sealing.update_input(execution_id, m["id"])
            value = sealing.unseal(sealing.ring(), value, where)
        return cls(m["id"], m["name"], value)


@dataclass(frozen=True)
class UpdateRow:
    id: str
    execution_id: str
    name: str
    input: Any
    status: Literal["admitted", "completed", "failed"]
    output: Any
    error: Any
    by_principal: str | None
    admitted_at: datetime
    ended_at: datetime | None

    @classmethod
    def from_record(cls, record: RecordLike) -> UpdateRow:
        """The row, its sealed input and output opened. Raises PayloadUnreadable."""
        values = {f.name: record[f.name] for f in fields(cls)}
        for column, context in (("input", sealing.update_input), ("output", sealing.update_output)):
            if sealing.is_envelope(values[column]):
                where = context(values["execution_id"], values["id"])
                values[column] = sealing.unseal(sealing.ring(), values[column], where)
        return cls(**values)


@dataclass(frozen=True)
class RunState:
    """What replay needs beside the row."""

    steps: tuple[StepRecord, ...]
    signals: tuple[BufferedSignal, ...]
    updates: tuple[PendingUpdate, ...]


@dataclass
class Checkpoint:
    """One fenced worker write (see the `checkpoint` query)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    consumed: list[dict[str, int]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    set_details: bool = False
    details: str | None = None
    status: str | None = None
    output: Any = None
    error: Any = None
    waits: list[dict[str, Any]] = field(default_factory=list)
    wake_at: datetime | None = None
    successor_id: str | None = None
    run_attempt_increment: int = 0
    truncate_from: int | None = None
    # False: a records-only write commits without waiting for the WAL flush (`checkpoint_step`;
    # kept through a worker's crash, not PostgreSQL's); any other write waits for it.
    flush: bool = True

    def records_only(self) -> bool:
        """A write that only records durable calls (most of a running run's writes)."""
        return bool(self.records) and not (
            self.consumed
            or self.events
            or self.set_details
            or self.status is not None
            or self.successor_id is not None
            or self.run_attempt_increment
            or self.truncate_from is not None
        )


@dataclass(frozen=True)
class CheckpointResult:
    status: str
    cancel_requested: bool
    last_event_id: int
