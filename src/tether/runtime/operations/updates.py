"""Updates: validate an update's input, admit it to the live run, and wait (bounded) for the
run's handler to finish it."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Callable
from typing import Any

from tether.runtime import errors
from tether.runtime.ids import new_update_id
from tether.runtime.operations.env import Env
from tether.runtime.operations.queries import get
from tether.runtime.operations.storage_errors import storage_errors
from tether.storage import repo
from tether.storage.notify import UPDATE_CHANNEL
from tether.storage.rows import UpdateRow


async def update(
    env: Env,
    execution_id: str,
    name: str,
    input: Any = None,
    *,
    timeout: float = 10.0,
    by: str | None = None,
) -> Any:
    """Validate, admit, and wait (bounded) for the update's handler; return its output.

    The input is checked against the update's model and validator before admission, so a
    refused update leaves no trace. Raises UpdateNotFound, InvalidInput, UpdateRejected,
    RunEnded, UpdateFailed, UpdateTimeout (admitted, not finished in time), Unavailable.
    """
    run = (await get(env, execution_id)).current
    definition = env.app.get(run.workflow).update(name)
    parsed = definition.parse_input(input)
    await _run_validator(definition.validator, parsed)
    raw = definition.input_adapter.dump_python(parsed, mode="json")
    env.check_payload(raw, errors.InvalidInput)
    update_id = new_update_id()
    done = asyncio.Event()
    unsubscribe = env.subscribe(
        UPDATE_CHANNEL, lambda _c, p: done.set() if p in (update_id, "") else None
    )
    try:
        async with storage_errors(), env.pool.acquire() as conn, conn.transaction():
            locked = await repo.get_execution(conn, run.id, lock=True)
            if locked is None or not locked.live:
                raise errors.RunEnded(f"run {run.id!r} has ended")
            await repo.insert_update(conn, update_id, run.id, name, raw, by)
            await repo.append_event(
                conn, run.id, "update_admitted", {"update_id": update_id, "name": name}
            )
        row = await _await_update(env, update_id, done, timeout)
    finally:
        unsubscribe()
    if row.status == "failed":
        raise errors.UpdateFailed(
            f"update {name!r} failed: {_describe(row.error)}", error=row.error
        )
    return row.output


def _describe(error: object) -> str:
    """A recorded handler failure in words: `Type: message` (the record as is otherwise)."""
    if isinstance(error, dict) and error.get("message") is not None:
        kind = error.get("type")
        return f"{kind}: {error['message']}" if kind else str(error["message"])
    return str(error)


async def _await_update(env: Env, update_id: str, done: asyncio.Event, timeout: float) -> UpdateRow:
    try:
        async with asyncio.timeout(timeout):
            while True:
                with storage_errors():
                    row = await repo.get_update(env.pool, update_id)
                if row is not None and row.status != "admitted":
                    return row
                done.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), env.poll_s())
    except TimeoutError:
        raise errors.UpdateTimeout(
            f"update {update_id} was admitted but did not finish in {timeout}s",
            update_id=update_id,
        ) from None


async def _run_validator(validator: Callable[[Any], Any] | None, value: Any) -> None:
    if validator is None:
        return
    try:
        verdict = validator(value)
        if inspect.isawaitable(verdict):
            verdict = await verdict
    except ValueError as exc:
        raise errors.UpdateRejected("update rejected by validator", reason=str(exc)) from exc
    if verdict is False or isinstance(verdict, str):
        reason = verdict if isinstance(verdict, str) else "refused"
        raise errors.UpdateRejected("update rejected by validator", reason=reason)
