"""Run one claimed execution: replay the workflow from the top and settle the row.

Every write is fenced by (lease_owner, attempt): a worker that lost its lease (paused past it,
or the run was terminated) has its writes refused and stops without applying anything. Only
losing the database reads as 'lost' here; a user's error, whatever its type, fails the step.
A run whose workers keep being lost is ended by the claim (the poison-run guard, worker.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tether.runtime import clock
from tether.runtime.context import Context
from tether.runtime.errors import NonDeterminism, ProtocolError, Rejected
from tether.runtime.ids import new_execution_id
from tether.runtime.registry import App, WorkflowDef
from tether.runtime.signals import CancelledRun, ContinueAsNew, LeaseGone, Park
from tether.runtime.statuses import ENDED_STATUSES
from tether.storage import repo
from tether.storage.checkpoints import CheckpointWriter
from tether.storage.driver import Connection, Database
from tether.storage.errors import (
    LeaseLost,
    PayloadUnreadable,
    StorageError,
    TamperedPayload,
    translated,
)
from tether.storage.pending import Pending
from tether.storage.repo import Checkpoint, CheckpointResult
from tether.storage.rows import ExecutionRow, RunState, unsealed

logger = logging.getLogger(__name__)

UNKNOWN_WORKFLOW_RETRY_S = 60.0


@dataclass
class RunIO:
    """Fenced writes for one claim of one run."""

    pool: Database
    execution_id: str
    owner: str
    attempt: int
    seen_event_id: int
    release_on_cancel: bool = False
    # The worker's group commit of checkpoints across its runs; None: one statement a write.
    writer: CheckpointWriter | None = None

    # The write `write_behind` started that no later write or `drain` has waited for yet.
    behind: Pending | None = None
    _draining: int = 0  # tasks of the run waiting in `drain`

    async def write(self, cp: Checkpoint) -> CheckpointResult:
        await self.drain()
        if self.writer is None:
            async with translated(), self.pool.acquire() as conn:
                return await self._write_in(conn, cp)
        result = await self.writer.write(
            self.execution_id, self.owner, self.attempt, self.seen_event_id, cp
        )
        self.seen_event_id += len(cp.events)
        return result

    async def write_behind(self, cp: Checkpoint) -> None:
        """Start writing `cp` (records of durable calls only) and return without waiting
        for its commit. Writes stay in order: the next one, or `drain`, waits for it first
        and raises what it raised. Until then, its failure (the lease or the database gone)
        cancels the run's task. Without a group writer this is `write`."""
        if self.writer is None or not cp.records_only():
            await self.write(cp)
            return
        await self.drain()
        run = asyncio.current_task()
        pending = self.writer.submit(
            self.execution_id, self.owner, self.attempt, self.seen_event_id, cp
        )
        self.behind = pending

        def failed(fut: asyncio.Future[CheckpointResult]) -> None:
            if fut.cancelled() or fut.exception() is None or self._draining:
                return  # it applied, or someone waits for it (and hears its error)
            if self.behind is pending and run is not None:
                run.cancel()

        pending.done.add_done_callback(failed)
        await asyncio.sleep(0)  # the statement's task sends it now, before the caller goes on

    async def drain(self) -> CheckpointResult | None:
        """Wait until the write `write_behind` left in flight has committed and return its
        result (None: none was in flight); raises what it raised (LeaseLost, StorageError).
        Several tasks of the run may wait at once."""
        pending = self.behind
        if pending is None:
            return None
        if not pending.done.done():
            self._draining += 1
            try:
                await pending.landed()  # a waiter's cancellation leaves the write alone
            finally:
                self._draining -= 1
        if self.behind is pending:
            self.behind = None
        return pending.done.result()  # raises what the write raised (cancelled with its statement)

    async def write_in(self, conn: Connection, cp: Checkpoint) -> CheckpointResult:
        await self.drain()
        return await self._write_in(conn, cp)

    async def _write_in(self, conn: Connection, cp: Checkpoint) -> CheckpointResult:
        result = await repo.checkpoint(
            conn, self.execution_id, self.owner, self.attempt, self.seen_event_id, cp
        )
        self.seen_event_id += len(cp.events)
        return result

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Connection]:
        """A pooled connection for user code (ctx.transaction). Only getting and giving it back
        are translated here: what the block raises is judged by the caller's guard."""
        with translated():
            conn = await self.pool.acquire()
        try:
            yield conn
        finally:
            with translated():
                await self.pool.release(conn)


@dataclass(frozen=True)
class UpdateContext:
    """What an update handler gets as its first argument: the run it acts on.

    An update handler makes no durable calls; it returns a value (the update's result) or
    raises (the update's error). See [`App.update`][tether.App.update].

    Attributes:
        execution_id: The run's id.
        workflow: The run's workflow name.
        update: The update's name.
    """

    execution_id: str
    workflow: str
    update: str


def _error(kind: str, exc: BaseException | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": kind}
    if exc is not None:
        out["type"] = type(exc).__name__
        out["message"] = str(exc)
    out.update(extra)
    return out


def _earliest(*times: datetime | None) -> datetime | None:
    present = [t for t in times if t is not None]
    return min(present) if present else None


async def execute(
    pool: Database,
    app: App,
    row: ExecutionRow,
    owner: str,
    *,
    io: RunIO | None = None,
    update_timeout: float = 5.0,
) -> str:
    """Run `row` (already claimed by `owner`) until it ends or parks; return its new status,
    or 'lost' when the lease went away (nothing more was written)."""
    io = io or RunIO(pool, row.id, owner, row.attempt, row.last_event_id)
    try:
        return await _execute_sealed(pool, app, row, io, update_timeout)
    except PayloadUnreadable:
        # A key this worker lacks (a rollout in progress): leave the run to one that has it.
        logger.error("a run's payload is sealed with a key not configured here", exc_info=True)
        return "lost"
    except (LeaseLost, LeaseGone):
        logger.info("lease on a run was lost; another worker owns it now")
        return "lost"
    except StorageError:
        logger.warning("database error while running a run; its lease will expire", exc_info=True)
        return "lost"
    except asyncio.CancelledError:
        if io.release_on_cancel:
            with contextlib.suppress(StorageError, LeaseLost):
                await asyncio.shield(io.write(Checkpoint(status="pending", wake_at=clock.now())))
        raise


async def _execute_sealed(
    pool: Database, app: App, row: ExecutionRow, io: RunIO, update_timeout: float
) -> str:
    """`_execute` on the row's opened payloads; a payload that fails authentication ends the
    run failed (never run on wrong data)."""
    try:
        return await _execute(pool, app, unsealed(row), io, update_timeout)
    except TamperedPayload as exc:
        logger.error("a stored payload of a run failed authentication; the run fails: %s", exc)
        return await _settle(io, Checkpoint(status="failed", error=_error("payload", exc)))


async def _execute(
    pool: Database, app: App, row: ExecutionRow, io: RunIO, update_timeout: float
) -> str:
    wf = app.workflows.get(row.workflow)
    if wf is None:
        logger.error("no workflow %r in this worker's app; retrying later", row.workflow)
        wake = clock.now() + timedelta(seconds=UNKNOWN_WORKFLOW_RETRY_S)
        return await _settle(io, Checkpoint(status="pending", wake_at=wake))
    if row.deadline_at is not None and clock.now() >= row.deadline_at:
        return await _settle(io, Checkpoint(status="timed_out", error=_error("timeout")))
    if row.attempt == 1 and row.last_event_id == 1:
        state = RunState((), (), ())  # a run's first claim: nothing recorded or sent yet
    else:
        state = await repo.load_run_state(pool, row.id)
    if state.updates:
        await _run_updates(pool, wf, row, io, state.updates, update_timeout)
        state = await repo.load_run_state(pool, row.id)
    ctx = Context(row, state, io, remotes=app)
    return await _run_body(pool, app, wf, row, ctx, io)


async def _run_body(
    pool: Database, app: App, wf: WorkflowDef, row: ExecutionRow, ctx: Context, io: RunIO
) -> str:
    deadline_loop: float | None = None
    if row.deadline_at is not None:
        remaining = (row.deadline_at - clock.now()).total_seconds()
        deadline_loop = asyncio.get_running_loop().time() + max(remaining, 0.0)
    timer = asyncio.timeout_at(deadline_loop)
    try:
        async with timer:
            if wf.takes_input:
                result = await wf.fn(ctx, wf.input_adapter.validate_python(row.input))
            else:
                result = await wf.fn(ctx)
        output = wf.output_adapter.dump_python(result, mode="json")
    except Park as park:
        wake = _earliest(park.wake_at, row.deadline_at)
        cp = ctx.take_buffer(status=park.status, waits=park.waits, wake_at=wake)
        return await _settle(io, cp)
    except CancelledRun:
        return await _settle(io, ctx.take_buffer(status="cancelled", error=_error("cancelled")))
    except ContinueAsNew as can:
        return await _continue_as_new(pool, app, row, ctx, io, can)
    except (LeaseLost, LeaseGone, StorageError, asyncio.CancelledError):
        raise
    except TimeoutError as exc:
        if timer.expired():
            return await _settle(io, ctx.take_buffer(status="timed_out", error=_error("timeout")))
        return await _fail(wf, ctx, io, exc)
    except ProtocolError as exc:
        err = _error("protocol", exc, code=exc.code, data=exc.data)
        err["message"] = exc.message
        return await _settle(io, ctx.take_buffer(status="failed", error=err))
    except Rejected as exc:
        return await _settle(io, ctx.take_buffer(status="failed", error=exc.as_error()))
    except NonDeterminism as exc:
        return await _settle(
            io, ctx.take_buffer(status="failed", error=_error("nondeterminism", exc))
        )
    except Exception as exc:  # noqa: BLE001 — user code: any error fails (or retries) the run
        return await _fail(wf, ctx, io, exc)
    return await _settle(io, ctx.take_buffer(status="completed", output=output))


async def _fail(wf: WorkflowDef, ctx: Context, io: RunIO, exc: Exception) -> str:
    if wf.retry.allows_another(ctx.run_attempt):
        wake = clock.now() + timedelta(seconds=wf.retry.delay(ctx.run_attempt))
        cp = ctx.take_buffer(
            status="pending",
            wake_at=wake,
            run_attempt_increment=1,
            truncate_from=ctx.first_failure_seq,
        )
        cp.events.append({"type": "run_retry", "data": _error("workflow", exc)})
        if cp.truncate_from is not None:
            cp.records = [r for r in cp.records if r["seq"] < cp.truncate_from]
        return await _settle(io, cp)
    logger.info("run failed: %s: %s", type(exc).__name__, exc)
    return await _settle(io, ctx.take_buffer(status="failed", error=_error("workflow", exc)))


def _ended_event(cp: Checkpoint) -> None:
    """A settle that ends the run leaves one `ended` event in history (audit; exactly-once
    checks). A worker never settles into `terminated`: an operator's terminate ends the run
    outside any worker's write, with a `terminated` event of its own."""
    if cp.status in ENDED_STATUSES:
        cp.events.append({"type": "ended", "data": {"status": cp.status, "error": cp.error}})


async def _settle(io: RunIO, cp: Checkpoint) -> str:
    _ended_event(cp)
    result = await io.write(cp)
    return result.status


async def _continue_as_new(
    pool: Database, app: App, row: ExecutionRow, ctx: Context, io: RunIO, can: ContinueAsNew
) -> str:
    target_name = can.data.workflow or row.workflow
    target = app.workflows.get(target_name)
    if target is None:
        err = {
            "kind": "workflow",
            "type": "WorkflowNotFound",
            "message": f"continue_as_new to unknown workflow {target_name!r}",
        }
        return await _settle(io, ctx.take_buffer(status="failed", error=err))
    try:
        new_input = target.dump_input(target.parse_input(_jsonable(target, can.data.input)))
    except Exception as exc:  # noqa: BLE001 — bad successor input fails this run, visibly
        return await _settle(io, ctx.take_buffer(status="failed", error=_error("workflow", exc)))
    new_id = new_execution_id()
    async with translated(), pool.acquire() as conn, conn.transaction():
        new = repo.NewExecution.following(
            row,
            id=new_id,
            business_id=row.business_id,
            input=new_input,
            deadline_at=target.deadline(),
            created_data={"continued_from": row.id},
            workflow=target.name,
            retention_s=target.retention_s,
        )
        await repo.insert_execution(conn, new)
        cp = ctx.take_buffer(status="continued_as_new", successor_id=new_id)
        _ended_event(cp)
        result = await io.write_in(conn, cp)
    return result.status


def _jsonable(wf: WorkflowDef, value: Any) -> Any:
    """Accept a model instance or plain JSON for a successor's input."""
    try:
        return wf.input_adapter.dump_python(value, mode="json")
    except Exception:  # noqa: BLE001 — not the input type: parse_input judges the raw value
        return value


async def _run_updates(
    pool: Database,
    wf: WorkflowDef,
    row: ExecutionRow,
    io: RunIO,
    updates: tuple[Any, ...],
    timeout: float,
) -> None:
    """Run admitted update handlers before the workflow body (the run's next decision cycle)."""
    for pending in updates:
        output: Any = None
        error: Any = None
        definition = wf.updates.get(pending.name)
        if definition is None:
            error = {"type": "UpdateNotFound", "message": f"no update {pending.name!r}"}
        else:
            uctx = UpdateContext(row.id, row.workflow, pending.name)
            try:
                async with asyncio.timeout(timeout):
                    value = await definition.call(uctx, pending.input)
                output = definition.output_adapter.dump_python(value, mode="json")
            except TimeoutError:
                error = {"type": "UpdateTimeout", "message": f"handler ran over {timeout}s"}
            except Exception as exc:  # noqa: BLE001 — user code: its failure is the update's result
                error = {"type": type(exc).__name__, "message": str(exc)}
        async with translated(), pool.acquire() as conn:
            await repo.finish_update(
                conn,
                row.id,
                io.owner,
                io.attempt,
                pending.id,
                name=pending.name,
                input=pending.input,
                output=output,
                error=error,
            )
        io.seen_event_id += 1
