"""Ending runs and starting their successors: cancel (cooperative), terminate (now), retry
(a new run after a failure, handles follow), resume (a retry that keeps the recorded calls
before a step, so the run goes on from that step) and rerun (an operator's new run under the
same business id; the old run is sealed)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tether.runtime import errors
from tether.runtime.ids import is_execution_id, new_execution_id
from tether.runtime.operations.env import Env
from tether.runtime.operations.queries import get
from tether.runtime.operations.storage_errors import storage_errors
from tether.runtime.realm.failures import is_left_pending
from tether.storage import admitting, carryover, repo
from tether.storage.repo import Conn
from tether.storage.rows import ExecutionRow, StepRecord


async def cancel(
    env: Env, execution_id: str, *, reason: str | None = None, by: str | None = None
) -> ExecutionRow:
    """Ask the live run of this handle's chain to cancel (cooperative: it ends `cancelled`
    at its next durable call). Idempotent: an ended run is returned unchanged."""
    run = (await get(env, execution_id)).current
    if not run.live:
        return run
    async with storage_errors(), env.pool.acquire() as conn, conn.transaction():
        # A run still in its queue never ran: it ends cancelled now.
        ended = run.queued and await admitting.cancel_queued(
            conn, run.id, _queued_cancel(reason, by)
        )
        if not ended and await repo.request_cancel(conn, run.id):
            await repo.append_event(conn, run.id, "cancel_requested", {"reason": reason, "by": by})
        row = await repo.get_execution(conn, run.id)
    assert row is not None  # noqa: S101 — rows are deleted only after they end
    return row


def _queued_cancel(reason: str | None, by: str | None) -> dict[str, Any]:
    return {
        "kind": "cancelled",
        "message": reason or "cancelled while queued",
        "by": by,
        "queued": True,
    }


async def terminate(
    env: Env, execution_id: str, *, reason: str | None = None, by: str | None = None
) -> ExecutionRow:
    """End the live run of this handle's chain now, without running more of it.
    Raises RunEnded when it has already ended."""
    run = (await get(env, execution_id)).current
    error = {"kind": "terminated", "message": reason or "terminated by an operator", "by": by}
    with storage_errors():
        if not await repo.terminate(env.pool, run.id, error):
            raise errors.RunEnded(f"run {run.id!r} has already ended")
        row = await repo.get_execution(env.pool, run.id)
    assert row is not None  # noqa: S101 — just written
    return row


async def _ended_run(env: Env, execution_id: str) -> ExecutionRow:
    """The run itself (no chain following), if in the env's tenant scope. Raises
    ExecutionNotFound."""
    if not is_execution_id(execution_id):
        # as `get` does: an id that has not the shape of one names no run (and one holding a
        # NUL would be refused by the database as invalid input, not as missing)
        raise errors.ExecutionNotFound("no run with that id")
    with storage_errors():
        old = await repo.get_execution(env.pool, execution_id)
    if old is None or not env.sees(old):
        raise errors.ExecutionNotFound(f"no run {execution_id!r}")
    return old


async def retry(env: Env, execution_id: str, *, by: str | None = None) -> ExecutionRow:
    """Start a new run with the same input after a run ended without success; it gets a
    new business id and the old run links to it (handles follow). Raises Conflict when the
    run is live, succeeded, or was already retried or continued."""
    old = await _ended_run(env, execution_id)
    if old.live:
        raise errors.Conflict(f"run {old.id!r} is still {old.status}")
    if old.status == "completed" or old.successor_id is not None or old.sealed_from:
        raise errors.Conflict(
            f"run {old.id!r} ended {old.status}; only a failed, timed-out, "
            "cancelled or terminated run that has no successor can be retried"
        )
    return await _successor(env, old, {"retry_of": old.id, "by": by}, "retried")


async def _successor(
    env: Env,
    old: ExecutionRow,
    created: dict[str, Any],
    verb: str,
    then: Callable[[Conn, str], Awaitable[None]] | None = None,
) -> ExecutionRow:
    """Insert the run that follows `old` under a new business id (same input), let `then`
    write more in the same transaction, and link `old` to it. Raises Conflict when another
    successor was linked first (`verb` says what that other call did)."""
    new_id = new_execution_id()
    following = repo.NewExecution.following(
        old,
        id=new_id,
        business_id=new_id,
        input=old.input,
        deadline_at=env.app.get(old.workflow).deadline(),
        created_data=created,
    )
    async with storage_errors(), env.pool.acquire() as conn, conn.transaction():
        row = await repo.insert_execution(conn, following)
        if then is not None:
            await then(conn, new_id)
        if not await repo.link_successor(conn, old.id, new_id):
            raise errors.Conflict(f"run {old.id!r} was {verb} concurrently")
    assert row is not None  # noqa: S101 — no idempotency key, so no conflict
    return row


def resume_point(records: list[StepRecord], step: str) -> int | None:
    """The seq of the first recorded call of `step`: named `step`, or `<kind>:step` (a
    protocol step's calls: `realm:when:`, `realm:auto:`, `realm:guard:`, `agent_step:`)."""
    return next(
        (r.seq for r in records if r.name == step or r.name.rsplit(":", 1)[-1] == step), None
    )


async def resume(
    env: Env, execution_id: str, *, from_step: str, by: str | None = None
) -> ExecutionRow:
    """A new run with the same input that keeps the old run's recorded calls before `from_step`
    (answers included), so replay goes on from that step; handles follow, as after a retry.
    From a protocol's cleanup step left pending, it keeps every call but the pending cleanup
    steps (a completed run too), so only they run. Raises Conflict (the run is live, completed,
    or already has a successor) and InvalidInput (no recorded call of that step)."""
    old = await _ended_run(env, execution_id)
    if old.live:
        raise errors.Conflict(f"run {old.id!r} is still {old.status}: end it first")
    if old.successor_id is not None or old.sealed_from:
        raise errors.Conflict(f"run {old.id!r} ({old.status}) cannot be resumed")
    with storage_errors():
        records = await repo.get_steps(env.pool, old.id)
    seq = resume_point(records, from_step)
    pending = [r.seq for r in records if r.done and is_left_pending(r.name, r.result)]
    if old.status == "completed" and seq not in pending:
        raise errors.Conflict(f"run {old.id!r} ({old.status}) cannot be resumed")
    if seq is None:
        raise errors.InvalidInput(f"run {old.id!r} has no recorded call of step {from_step!r}")
    # From a cleanup step left pending (its handler was missing): keep every other call, so
    # only the pending cleanup steps run (Realm's `run drain`); else keep the calls before it.
    kept = [
        r for r in records if r.done and (r.seq not in pending if seq in pending else r.seq < seq)
    ]

    async def carry(conn: Conn, new_id: str) -> None:
        await carryover.insert_steps(conn, new_id, kept)
        # A second event: the first claim then loads the kept calls (the executor skips that
        # read for a run whose only event is `created`).
        await repo.append_event(
            conn, new_id, "resumed", {"from": old.id, "step": from_step, "kept": len(kept)}
        )

    created = {"resume_of": old.id, "from_step": from_step, "by": by}
    return await _successor(env, old, created, "resumed", carry)


async def rerun(
    env: Env, execution_id: str, *, input: Any = None, by: str | None = None
) -> ExecutionRow:
    """Operator rerun of an ended run under the same business id (new input optional).
    The old run is sealed: it keeps the ending it had and handles do not follow it.
    Raises Conflict when the run is live or already sealed or continued."""
    old = await _ended_run(env, execution_id)
    if old.live or old.sealed_from or old.status == "continued_as_new":
        raise errors.Conflict(f"run {old.id!r} ({old.status}) cannot be rerun")
    wf = env.app.get(old.workflow)
    value = old.input if input is None else wf.dump_input(wf.parse_input(input))
    new_id = new_execution_id()
    async with storage_errors(), env.pool.acquire() as conn, conn.transaction():
        if not await repo.seal(conn, old.id):
            raise errors.Conflict(f"run {old.id!r} was sealed concurrently")
        row = await repo.insert_execution(
            conn,
            repo.NewExecution.following(
                old,
                id=new_id,
                business_id=old.business_id,
                input=value,
                deadline_at=wf.deadline(),
                created_data={"rerun_of": old.id, "by": by},
            ),
        )
    assert row is not None  # noqa: S101 — no idempotency key, so no conflict
    return row
