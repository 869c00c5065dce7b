"""Ending runs: cancel (cooperative) and terminate (now). Running an ended run again is
`again`."""

from __future__ import annotations

from typing import Any

from tether.runtime import errors
from tether.runtime.operations.env import Env
from tether.runtime.operations.queries import get
from tether.runtime.operations.storage_errors import storage_errors
from tether.storage import admitting, repo
from tether.storage.rows import ExecutionRow


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
