"""Starting a run: validate the input, apply the admission options (profile, queue, labels,
singleton), insert the row (committed before returning), and resolve an idempotency key to the
run that already holds it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from tether.observability import tracing
from tether.runtime import admission, errors
from tether.runtime.ids import new_execution_id
from tether.runtime.operations.env import Env, Taker
from tether.runtime.operations.storage_errors import storage_errors
from tether.runtime.policy import seconds
from tether.runtime.registry import WorkflowDef
from tether.storage import admitting, repo
from tether.storage.notify import READY_CHANNEL
from tether.storage.rows import ExecutionRow

#: `singleton="running"` refuses while a run of the workflow is admitted and live (Dagu's start);
#: `"active"` also while one waits in its queue (Dagu's enqueue).
Singleton = Literal["running", "active"]


@dataclass(frozen=True)
class Started:
    execution: ExecutionRow
    deduped: bool


def _check_idempotency_key(key: str | None) -> None:
    if key is not None and (not (0 < len(key) <= 255) or "\x00" in key):
        raise errors.InvalidInput("idempotency key must be 1-255 characters, without NUL")


def resolve_queue(env: Env, wf: WorkflowDef, queue: str | None) -> str | None:
    """The queue a run waits in: the start's `queue`, else the workflow's, else its implicit
    max_active_runs queue, else none. The workflow's own name as `queue` is its own queue
    (Dagu names a DAG's default queue after the DAG): a configured queue of that name, else
    the workflow's default. Raises QueueNotFound for an unconfigured named queue."""
    if queue == wf.name and queue not in env.admission.queues:
        queue = None
    name = queue if queue is not None else wf.rules.queue
    if name is not None:
        env.admission.limit(name)
        return name
    if wf.rules.max_active_runs is not None:
        return admission.implicit_queue(wf.name)
    return None


def prepare(
    env: Env,
    workflow: str,
    input: Any = None,
    *,
    idempotency_key: str | None = None,
    business_id: str | None = None,
    retention: float | timedelta | None = None,
    created: Mapping[str, Any] | None = None,
    queue: str | None = None,
    profile: str | None = None,
    labels: Sequence[str] | Mapping[str, str] | None = None,
) -> repo.NewExecution:
    """Validate a start and build the row to insert (see `start`); nothing is stored.
    Raises WorkflowNotFound, ProfileNotFound, QueueNotFound, InvalidInput."""
    wf = env.app.get(workflow)
    prof = env.admission.profile(profile) if profile is not None else None
    raw = admission.merge_params(prof, input) if prof is not None else input
    value = wf.dump_input(wf.parse_input(raw)) if wf.takes_input else None
    env.check_payload(value, errors.InvalidInput)
    _check_idempotency_key(idempotency_key)
    retention_s = seconds(retention)
    new_id = new_execution_id()
    return repo.NewExecution(
        id=new_id,
        workflow=wf.name,
        business_id=business_id or new_id,
        input=value,
        idempotency_key=idempotency_key,
        retention_s=int(retention_s) if retention_s is not None else wf.retention_s,
        deadline_at=wf.deadline(),
        created_data=_with_trace(created),
        queue=resolve_queue(env, wf, queue),
        labels={**wf.rules.labels, **admission.parse_labels(labels)},
        profile=prof.name if prof is not None else None,
        profile_env=dict(prof.env) if prof is not None else None,
        tenant=env.tenant,  # None for an every-tenant scope: the run has no tenant
    )


async def start(
    env: Env,
    workflow: str,
    input: Any = None,
    *,
    idempotency_key: str | None = None,
    business_id: str | None = None,
    retention: float | timedelta | None = None,
    on_live_match: Literal["return", "fail"] = "return",
    by: str | None = None,
    queue: str | None = None,
    singleton: Singleton | None = None,
    profile: str | None = None,
    labels: Sequence[str] | Mapping[str, str] | None = None,
) -> Started:
    """Start a run, committed before this returns.

    With `idempotency_key`, a repeat with the same input returns the run that holds the
    key (`deduped=True`), live or ended, for as long as its row lives; with different input
    it raises IdempotencyMismatch; with on_live_match="fail" a live holder raises
    RunAlreadyActive. `queue` overrides the workflow's queue; `profile` merges that profile's
    params under `input` and keeps its env with the run; `labels` are merged over the
    workflow's; `singleton` refuses the start while a run of the workflow is live (see
    `Singleton`). Raises WorkflowNotFound, ProfileNotFound, QueueNotFound, InvalidInput,
    SingletonConflict, Unavailable.
    """
    if singleton not in (None, "running", "active"):
        raise errors.InvalidInput(f"singleton must be 'running' or 'active', not {singleton!r}")
    new = prepare(
        env,
        workflow,
        input,
        idempotency_key=idempotency_key,
        business_id=business_id,
        retention=retention,
        created={"by": by} if by else None,
        queue=queue,
        profile=profile,
        labels=labels,
    )
    with storage_errors():
        if singleton is not None:
            async with env.pool.acquire() as conn, conn.transaction():
                row = await _insert_singleton(conn, new, singleton)
            if row is not None:
                return Started(row, deduped=False)
        return await insert_or_resolve(
            env.pool, new, on_live_match, echo=env.echo, takers=env.takers
        )


async def insert_or_resolve(
    conn: repo.Conn,
    new: repo.NewExecution,
    on_live_match: Literal["return", "fail"],
    *,
    key_taken: bool = False,
    echo: Callable[[list[tuple[str, str]]], None] | None = None,
    takers: Sequence[Taker] = (),
) -> Started:
    """Insert `new`, or resolve its idempotency key to the run that holds it (`key_taken`:
    an insert already found it taken); `conn` is a pool or a connection outside a transaction.
    The workers are woken once the insert has committed (`repo.wake`: the insert itself then
    never waits for PostgreSQL's notification lock), this process's first (`echo`). A run due
    at once is handed to one of `takers` (this process's workers) with a free slot instead:
    inserted already claimed by it, no one is woken (`_insert_taken`). Raises
    IdempotencyMismatch, RunAlreadyActive, Unavailable, StorageError."""
    for _ in range(3):
        if not key_taken:
            handed, row = await _insert_taken(conn, new, takers)
            if row is not None and handed:
                return Started(row, deduped=False)
            if not handed:
                row = await repo.insert_execution(conn, new, notify=False)
            if row is not None:
                notes = [(READY_CHANNEL, row.id)]
                if echo is not None:
                    echo(notes)
                await repo.wake(conn, notes)
                return Started(row, deduped=False)
        key_taken = False
        existing = await _holder(conn, new, on_live_match)
        if existing is not None:
            return Started(existing, deduped=True)
    raise errors.Unavailable("could not create the run; retry")


async def _insert_taken(
    conn: repo.Conn, new: repo.NewExecution, takers: Sequence[Taker]
) -> tuple[bool, ExecutionRow | None]:
    """The start's hand-over: insert `new` already claimed by a taker with a free slot, who
    then runs it at once, with neither a wake-up nor a claim statement: (True, the row), or
    (True, None) when the key is taken; (False, None) when no taker had room or the run waits
    in a queue (nothing inserted: insert it as usual). The insert and the
    hand-over run in a task of their own, so a cancelled caller still leaves the run with its
    worker; a run inserted but never adopted (the process dies) is claimed again by any worker
    once its lease expires, as any claimed run whose worker is lost."""
    if new.queue is None:  # a queued run is admitted by its queue, never handed over
        for taker in takers:
            lease = taker.reserve()
            if lease is not None:
                return True, await asyncio.shield(_insert_claimed(conn, new, taker, lease))
    return False, None


async def _insert_claimed(
    conn: repo.Conn, new: repo.NewExecution, taker: Taker, lease: repo.Lease
) -> ExecutionRow | None:
    rows = None
    try:
        rows = await repo.insert_claimed(conn, new, lease)
    finally:
        if rows is None:
            taker.unreserve()
        else:
            taker.adopt(rows[0])
    return rows[1] if rows is not None else None


async def _insert_singleton(
    conn: repo.Conn, new: repo.NewExecution, singleton: Singleton
) -> ExecutionRow | None:
    """Insert under the workflow's start lock unless a run of it is live. None: the
    idempotency key is held (the caller resolves it). Raises SingletonConflict."""
    await admitting.lock_workflow_starts(conn, new.workflow)
    if new.idempotency_key is not None and await repo.get_by_idempotency_key(
        conn, new.workflow, new.idempotency_key, new.tenant
    ):
        return None
    active = singleton == "active"
    live = await admitting.live_run_of_workflow(conn, new.workflow, new.tenant, count_queued=active)
    if live is not None:
        state = "queued or running" if active else "running"
        raise errors.SingletonConflict(
            f"singleton: a run of {new.workflow!r} is already {state}",
            execution_id=live,
        )
    return await repo.insert_execution(conn, new)


async def _holder(
    conn: repo.Conn, new: repo.NewExecution, on_live_match: Literal["return", "fail"]
) -> ExecutionRow | None:
    """The run holding the new run's idempotency key; None when it was deleted meanwhile.
    Raises IdempotencyMismatch, RunAlreadyActive."""
    key = new.idempotency_key
    assert key is not None  # noqa: S101 — only a key can conflict
    existing = await repo.get_by_idempotency_key(conn, new.workflow, key, new.tenant)
    if existing is None:
        return None  # deleted between the two statements: try the insert again
    if existing.input != new.input:
        raise errors.IdempotencyMismatch(
            f"idempotency key {key!r} was used with different input", execution_id=existing.id
        )
    if on_live_match == "fail" and existing.live:
        raise errors.RunAlreadyActive(execution_id=existing.id)
    return existing


def _with_trace(created: Mapping[str, Any] | None) -> dict[str, Any]:
    """The `created` event's data, with the caller's trace context while tracing (every
    attempt of the run continues that trace, on whichever worker)."""
    data = dict(created or {})
    traceparent = tracing.current_traceparent()
    if traceparent is not None:
        data.setdefault(tracing.TRACEPARENT, traceparent)
    return data
