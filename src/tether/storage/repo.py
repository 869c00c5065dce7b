"""Typed async functions over the named queries. Each takes a connection or a pool (anything
`driver.Queryable`) and returns frozen rows; every asyncpg error leaves as a StorageError."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tether.storage import sealing
from tether.storage.driver import Queryable
from tether.storage.errors import LeaseLost, translated
from tether.storage.queries import Q
from tether.storage.rows import (
    BufferedSignal,
    ExecutionRow,
    HistoryEvent,
    PendingUpdate,
    RunState,
    StepRecord,
    UpdateRow,
)
from tether.storage.rows import Checkpoint as Checkpoint  # callers: repo.Checkpoint
from tether.storage.rows import CheckpointResult as CheckpointResult
from tether.storage.rows import Lease as Lease  # callers: repo.Lease
from tether.storage.rows import NewExecution as NewExecution  # callers: repo.NewExecution

Conn = Queryable  # what a query runs on: a pool, or a connection inside a transaction


async def insert_execution(
    conn: Conn, new: NewExecution, *, notify: bool = True
) -> ExecutionRow | None:
    """Insert a pending run; None when (workflow, tenant, idempotency_key) is already taken.
    `notify=False`: the workers are not woken here (send `wake` once it has committed)."""
    rec = await _insert_execution(conn, new, notify, None)
    return ExecutionRow.from_record(rec) if rec else None


async def insert_claimed(
    conn: Conn, new: NewExecution, lease: Lease
) -> tuple[ExecutionRow, ExecutionRow] | None:
    """Insert a run (wakes no one) already claimed under `lease` when it is due at once (no
    queue; else it is inserted queued, as `insert_execution` does); None when its key is
    taken. The row twice: with its payloads as stored (for the worker, as `claim` returns
    them) and opened (for the caller)."""
    rec = await _insert_execution(conn, new, False, lease)
    if rec is None:
        return None
    return ExecutionRow.from_record(rec, unseal=False), ExecutionRow.from_record(rec)


async def _insert_execution(
    conn: Conn, new: NewExecution, notify: bool, lease: Lease | None
) -> Any:
    with translated():
        return await conn.fetchrow(
            Q["insert_execution"],
            new.id,
            new.workflow,
            new.business_id,
            sealing.stored(new.input, sealing.execution_input, new.id),
            new.idempotency_key,
            new.predecessor_id,
            new.root_id or new.id,
            new.retention_s,
            new.deadline_at,
            new.created_data,
            new.queue,
            dict(new.labels),
            new.profile,
            dict(new.profile_env) if new.profile_env is not None else None,
            new.tenant,
            notify,
            lease.owner if lease is not None else None,
            float(lease.lease_s) if lease is not None else 0.0,
        )


async def wake(conn: Conn, notes: Sequence[tuple[str, str]]) -> None:
    """NOTIFY each (channel, payload) in one statement, after the write it announces has
    committed, in a transaction that does not wait for its flush (see the `wake` query).
    `conn` must not be in a transaction."""
    if notes:
        with translated():
            await conn.execute(Q["wake"], [n[0] for n in notes], [n[1] for n in notes])


async def get_execution(
    conn: Conn, execution_id: str, *, lock: bool = False
) -> ExecutionRow | None:
    query = Q["get_execution_for_update"] if lock else Q["get_execution"]
    with translated():
        rec = await conn.fetchrow(query, execution_id)
    return ExecutionRow.from_record(rec) if rec else None


async def get_executions(conn: Conn, execution_ids: Sequence[str]) -> list[ExecutionRow]:
    """The rows of those ids that exist, in no particular order."""
    with translated():
        recs = await conn.fetch(Q["get_executions"], list(execution_ids))
    return [ExecutionRow.from_record(rec) for rec in recs]


async def get_by_idempotency_key(
    conn: Conn, workflow: str, key: str, tenant: str | None
) -> ExecutionRow | None:
    """The run holding `key` for `workflow` in `tenant` (None: the runs with no tenant)."""
    with translated():
        rec = await conn.fetchrow(Q["get_by_idempotency_key"], workflow, key, tenant)
    return ExecutionRow.from_record(rec) if rec else None


async def get_chain(conn: Conn, execution_id: str) -> list[ExecutionRow]:
    """The run and its successors, oldest first (empty when the run does not exist)."""
    with translated():
        recs = await conn.fetch(Q["get_chain"], execution_id)
    return [ExecutionRow.from_record(r) for r in recs]


async def list_executions(
    conn: Conn,
    *,
    workflow: str | None = None,
    statuses: Sequence[str] | None = None,
    business_id: str | None = None,
    root_id: str | None = None,
    after: tuple[datetime, str] | None = None,
    limit: int = 50,
    labels: Mapping[str, str] | None = None,
    label_keys: Sequence[str] | None = None,
    tenant: str | None = None,
    every_tenant: bool = True,
    started_by: str | None = None,
    text: str | None = None,
) -> list[ExecutionRow]:
    """Newest first; `labels`: pairs a run must carry, `label_keys`: keys it must have. Unless
    `every_tenant`, only the runs of `tenant` (None: with no tenant). `started_by`: only the
    runs that principal started; `text`: only those whose id starts with it or whose business
    id holds it."""
    with translated():
        recs = await conn.fetch(
            Q["list_executions"],
            workflow,
            list(statuses) if statuses is not None else None,
            business_id,
            root_id,
            after[0] if after else None,
            after[1] if after else None,
            limit,
            dict(labels) if labels else None,
            list(label_keys) if label_keys else None,
            not every_tenant,
            tenant,
            started_by,
            text,
        )
    return [ExecutionRow.from_record(r) for r in recs]


async def get_history(conn: Conn, execution_id: str) -> list[HistoryEvent]:
    with translated():
        recs = await conn.fetch(Q["get_history"], execution_id)
    return [HistoryEvent.from_record(r) for r in recs]


async def get_steps(conn: Conn, execution_id: str) -> list[StepRecord]:
    with translated():
        recs = await conn.fetch(Q["get_steps"], execution_id)
    return [StepRecord.from_mapping(r, execution_id) for r in recs]


async def get_history_page(
    conn: Conn, execution_id: str, before: int | None, limit: int
) -> list[HistoryEvent]:
    """At most `limit` events before event `before` (None: from the newest), newest first."""
    with translated():
        recs = await conn.fetch(Q["get_history_page"], execution_id, before, limit)
    return [HistoryEvent.from_record(r) for r in recs]


async def get_steps_page(
    conn: Conn, execution_id: str, before: int | None, limit: int
) -> list[StepRecord]:
    """At most `limit` recorded calls before seq `before` (None: from the newest), newest
    first."""
    with translated():
        recs = await conn.fetch(Q["get_steps_page"], execution_id, before, limit)
    return [StepRecord.from_mapping(r, execution_id) for r in recs]


async def get_starters(conn: Conn, execution_ids: Sequence[str]) -> dict[str, str | None]:
    """Who started each run (its `created` event's `by`; None where none was recorded)."""
    with translated():
        recs = await conn.fetch(Q["get_starters"], list(execution_ids))
    return {r["execution_id"]: r["by"] for r in recs}


@dataclass(frozen=True)
class Abandon:
    """When a claim gives up on a run instead of running it: the claim that finds its lease
    lost `after` times in a row (no progress in between) ends it failed with `error`, whose
    `message` is `message` with the count in place of `%s` (see claim_executions)."""

    after: int = 10
    error: Mapping[str, Any] = field(
        default_factory=lambda: {"kind": "abandoned", "type": "RunAbandoned"}
    )
    message: str = "run abandoned: its worker was lost %s times in a row while running it"

    def __post_init__(self) -> None:
        if self.after < 1:
            raise ValueError("a run is abandoned after at least 1 lost lease")


async def claim(
    conn: Conn,
    owner: str,
    lease_s: float,
    limit: int,
    abandon: Abandon | None = None,
    *,
    traced: bool = False,
) -> list[ExecutionRow]:
    """Lease up to `limit` due runs to `owner` ('running'), or abandon them ('failed', per
    `abandon`); payloads as stored (each opened by its executor); `traced`: with traceparents."""
    abandon = abandon or Abandon()
    with translated():
        recs = await conn.fetch(
            Q["claim_executions"],
            owner,
            float(lease_s),
            limit,
            abandon.after,
            dict(abandon.error),
            abandon.message,
            traced,
        )
    return [ExecutionRow.from_record(r, unseal=False, traced=traced) for r in recs]


async def load_run_state(conn: Conn, execution_id: str) -> RunState:
    with translated():
        rec = await conn.fetchrow(Q["load_run_state"], execution_id)
    assert rec is not None  # noqa: S101 — a SELECT of scalar subqueries always returns a row
    return RunState(
        steps=tuple(StepRecord.from_mapping(m, execution_id) for m in rec["steps"]),
        signals=tuple(BufferedSignal.from_mapping(m, execution_id) for m in rec["signals"]),
        updates=tuple(PendingUpdate.from_mapping(m, execution_id) for m in rec["updates"]),
    )


def sealed_checkpoint(execution_id: str, cp: Checkpoint) -> tuple[list[dict[str, Any]], Any]:
    """The write's step records and output as stored: sealed while encryption is on."""
    ring = sealing.ring()
    if ring is None:
        return cp.records, cp.output
    where = sealing.step_result
    return [
        {**r, "result": sealing.seal(ring, r["result"], where(execution_id, r["seq"]))}
        for r in cp.records
    ], sealing.seal(ring, cp.output, sealing.execution_output(execution_id))


async def checkpoint(
    conn: Conn, execution_id: str, owner: str, attempt: int, seen_event_id: int, cp: Checkpoint
) -> CheckpointResult:
    """Apply a worker write. Raises LeaseLost (nothing written) when the fence fails."""
    records, output = sealed_checkpoint(execution_id, cp)
    with translated():
        rec = await conn.fetchrow(
            Q["checkpoint"],
            execution_id,
            owner,
            attempt,
            records,
            cp.consumed,
            cp.events,
            cp.set_details,
            cp.details,
            cp.status,
            output,
            cp.error,
            cp.waits,
            cp.wake_at,
            seen_event_id,
            cp.successor_id,
            cp.run_attempt_increment,
            cp.truncate_from,
        )
    if rec is None:
        raise LeaseLost()
    return CheckpointResult(rec["status"], rec["cancel_requested"], rec["last_event_id"])


async def finish_update(
    conn: Conn,
    execution_id: str,
    owner: str,
    attempt: int,
    update_id: str,
    *,
    name: str,
    input: Any,
    output: Any,
    error: Any,
) -> int:
    """Record an update's outcome (fenced) and hand it to the workflow as a signal on channel
    `update:<name>` (`{id, input, output, error}`); returns the run's new last_event_id."""
    status = "failed" if error is not None else "completed"
    payload = {"id": update_id, "input": input, "output": output, "error": error}
    stored = sealing.stored(output, sealing.update_output, execution_id, update_id)
    signal = sealing.stored(payload, sealing.signal_payload, execution_id, f"update:{name}", None)
    with translated():
        rec = await conn.fetchrow(
            Q["finish_update"],
            execution_id,
            owner,
            attempt,
            update_id,
            status,
            stored,
            error,
            signal,
        )
    if rec is None:
        raise LeaseLost()
    return int(rec["last_event_id"])


async def heartbeat(
    conn: Conn, owner: str, leases: Sequence[tuple[str, int]], lease_s: float
) -> dict[str, bool]:
    """Extend leases; returns {id: cancel_requested} for the leases still held."""
    if not leases:
        return {}
    with translated():
        recs = await conn.fetch(
            Q["heartbeat"],
            owner,
            [lease[0] for lease in leases],
            [lease[1] for lease in leases],
            float(lease_s),
        )
    return {r["id"]: r["cancel_requested"] for r in recs}


async def append_event(conn: Conn, execution_id: str, type_: str, data: Any) -> int | None:
    """Append an outside event (wakes a parked run); None when the run is gone or ended."""
    with translated():
        value = await conn.fetchval(Q["append_event"], execution_id, type_, data)
    return int(value) if value is not None else None


async def answer_keep_parked(
    conn: Conn, execution_id: str, waits: list[dict[str, Any]], type_: str, data: Any
) -> int | None:
    """Record a partial answer on a parked run (see the query); None if it is not parked."""
    with translated():
        rec = await conn.fetchrow(Q["answer_keep_parked"], execution_id, waits, type_, data)
    return int(rec["last_event_id"]) if rec else None


async def insert_signal(
    conn: Conn, execution_id: str, channel: str, key: str | None, payload: Any, by: str | None
) -> int | None:
    """Buffer a signal; None when `key` was already answered."""
    with translated():
        value = await conn.fetchval(
            Q["insert_signal"],
            execution_id,
            channel,
            key,
            sealing.stored(payload, sealing.signal_payload, execution_id, channel, key),
            by,
        )
    return int(value) if value is not None else None


async def get_signal_by_key(conn: Conn, execution_id: str, key: str) -> BufferedSignal | None:
    with translated():
        rec = await conn.fetchrow(Q["get_signal_by_key"], execution_id, key)
    if rec is None:
        return None
    payload = rec["payload"]
    if sealing.is_envelope(payload):
        where = sealing.signal_payload(execution_id, rec["channel"], key)
        payload = sealing.unseal(sealing.ring(), payload, where)
    return BufferedSignal(0, rec["channel"], key, payload, rec["by_principal"])


async def insert_update(
    conn: Conn, update_id: str, execution_id: str, name: str, input_: Any, by: str | None
) -> None:
    with translated():
        await conn.execute(
            Q["insert_update"],
            update_id,
            execution_id,
            name,
            sealing.stored(input_, sealing.update_input, execution_id, update_id),
            by,
        )


async def get_update(conn: Conn, update_id: str) -> UpdateRow | None:
    with translated():
        rec = await conn.fetchrow(Q["get_update"], update_id)
    return UpdateRow.from_record(rec) if rec else None


async def request_cancel(conn: Conn, execution_id: str) -> bool:
    with translated():
        return await conn.fetchval(Q["request_cancel"], execution_id) is not None


async def terminate(conn: Conn, execution_id: str, error: Any) -> bool:
    with translated():
        return await conn.fetchrow(Q["terminate_execution"], execution_id, error) is not None


async def end_parked(conn: Conn, execution_id: str, status: str, error: Any) -> bool:
    """End a parked run now with `status` and `error` (see the query); False when it is not
    parked."""
    with translated():
        return await conn.fetchrow(Q["end_parked"], execution_id, status, error) is not None


async def seal(conn: Conn, execution_id: str) -> bool:
    with translated():
        return await conn.fetchval(Q["seal_execution"], execution_id) is not None


async def link_successor(conn: Conn, execution_id: str, successor_id: str) -> bool:
    with translated():
        return await conn.fetchval(Q["link_successor"], execution_id, successor_id) is not None
