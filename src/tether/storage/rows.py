"""Frozen rows built at the storage edge from asyncpg records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal, get_args

import asyncpg

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
ENDED_STATUSES: frozenset[str] = frozenset(STATUSES) - LIVE_STATUSES


@dataclass(frozen=True)
class ExecutionRow:
    """One run: the single source of truth for its task view (DESIGN.md §2)."""

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

    @property
    def queued(self) -> bool:
        """Waiting in its queue for a slot (Dagu's `queued`): never claimed yet."""
        return self.queue is not None and self.admitted_at is None and self.ended_at is None

    @property
    def live(self) -> bool:
        return self.status in LIVE_STATUSES

    @classmethod
    def from_record(cls, record: RecordLike) -> ExecutionRow:
        # On the hot path of every read (tasks/get): fill the frozen instance directly instead
        # of going through the generated __init__ with keyword arguments (≈ 9 µs a row).
        row = object.__new__(cls)
        row.__dict__.update({name: record[name] for name in _EXECUTION_FIELDS})
        return row


_EXECUTION_FIELDS = tuple(f.name for f in fields(ExecutionRow))


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

    @classmethod
    def from_mapping(cls, m: RecordLike) -> StepRecord:
        return cls(m["seq"], m["kind"], m["name"], m["result"], m["done"])


@dataclass(frozen=True)
class BufferedSignal:
    id: int
    channel: str
    key: str | None
    payload: Any
    by: str | None

    @classmethod
    def from_mapping(cls, m: RecordLike) -> BufferedSignal:
        return cls(m["id"], m["channel"], m["key"], m["payload"], m["by"])


@dataclass(frozen=True)
class PendingUpdate:
    id: str
    name: str
    input: Any

    @classmethod
    def from_mapping(cls, m: RecordLike) -> PendingUpdate:
        return cls(m["id"], m["name"], m["input"])


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
        return cls(**{f.name: record[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class RunState:
    """What replay needs beside the row."""

    steps: tuple[StepRecord, ...]
    signals: tuple[BufferedSignal, ...]
    updates: tuple[PendingUpdate, ...]
