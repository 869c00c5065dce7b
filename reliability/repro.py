"""Minimal reproductions of the Tether bugs the reliability suite found.

    python -m reliability.repro

Each check prints FIXED or BUG with what it saw; exit status 1 while any bug is present.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

import asyncpg
from pydantic import BaseModel

from tether.runtime import errors as e
from tether.runtime.context import Context
from tether.runtime.operations import Operations
from tether.runtime.registry import App
from tether.runtime.service import running
from tether.runtime.worker import WorkerSettings
from tether.storage import embedded, migrate, pool
from tether.storage.errors import DatabaseUnavailable, translated

repro_app = App("repro")
_killed: set[str] = set()


async def _drop_own_connection(conn: asyncpg.Connection, execution_id: str) -> int:
    """The first time: the database drops this connection mid-step (as in a restart)."""
    if execution_id not in _killed:
        _killed.add(execution_id)
        await conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
    return 1


@repro_app.workflow
async def one_transaction(ctx: Context) -> int:
    value: int = await ctx.transaction(_drop_own_connection, ctx.execution_id, name="t")
    return value


class Note(BaseModel):
    text: str


@repro_app.workflow
async def echo(ctx: Context, note: Note) -> str:
    return note.text


async def nul_in_input(ops: Operations) -> str | None:
    """Bug: input holding a NUL character (valid JSON, refused by jsonb) is answered as
    'database unavailable' (503) instead of invalid input."""
    try:
        await ops.start("echo", {"text": "a\x00b"})
    except e.InvalidInput:
        return None
    except e.Unavailable as exc:
        return f"Operations.start(input with \\u0000) raised Unavailable: {exc.message}"
    return "accepted"


async def nul_in_task_id(ops: Operations) -> str | None:
    """Bug: an id with a NUL character is answered as 'database unavailable' (503)."""
    try:
        await ops.get("ex_abc\x00")
    except e.ExecutionNotFound:
        return None
    except e.Unavailable as exc:
        return f"Operations.get('ex_abc\\x00') raised Unavailable: {exc.message}"
    return "no error"


async def internal_client_error() -> str | None:
    """Bug: asyncpg's InternalClientError (a connection broken mid-operation, seen during a
    PostgreSQL restart) is not translated, so the router answers -32603."""
    try:
        with translated():
            raise asyncpg.exceptions.InternalClientError("cannot switch to state 12")
    except DatabaseUnavailable:
        return None
    except asyncpg.exceptions.InternalClientError:
        return "translated() let asyncpg InternalClientError through untranslated"


async def acquire_outside_translation() -> str | None:
    """Bug: `async with _storage(), self.pool.acquire()` in Operations (answer, signal, update,
    cancel, retry, rerun) leaves a failure to *open* a pooled connection untranslated (the
    socket error is raised by acquire, outside repo's translated()), so when the database goes
    away between the handle lookup and the write the router answers -32603."""
    dead = await asyncpg.create_pool(
        "postgresql://postgres@/postgres?host=/nonexistent-tether-socket-dir", min_size=0
    )
    assert dead is not None
    ops = Operations(dead, repro_app)
    run_id = "ex_" + "a" * 32
    try:
        await ops.answer(run_id, f"{run_id}:approval:go:1", {"decision": "approve"})
    except e.Unavailable:
        return None
    except Exception as exc:  # noqa: BLE001 — what leaks is the point of the check
        return f"Operations.answer with the database gone raised {type(exc).__name__}: {exc}"
    finally:
        await dead.close()
    return "no error"


async def dropped_transaction_connection(dsn: str, db: asyncpg.Pool) -> str | None:
    """Bug: a connection lost inside ctx.transaction fails the run for good (a database
    error is treated as the workflow's own exception) instead of retrying the step."""
    settings = WorkerSettings(lease_s=2.0, poll_s=0.1)
    async with running(dsn, repro_app, worker_settings=settings, janitor_interval_s=None) as rt:
        started = await rt.ops.start("one_transaction", None)
        view = await rt.ops.wait_for_end(started.execution.id, timeout=30)
    run = view.current
    if run.status == "completed":
        return None
    return f"run ended {run.status} with {run.error}"


async def main(dsn: str) -> int:
    conn = await pool.connect(dsn)
    await migrate.migrate(conn)
    await conn.close()
    db = await pool.create_pool(dsn)
    ops = Operations(db, repro_app)
    bugs = 0
    try:
        checks = (
            ("NUL in a task id", nul_in_task_id(ops)),
            ("NUL in input", nul_in_input(ops)),
            ("InternalClientError", internal_client_error()),
            ("pool.acquire outside translated()", acquire_outside_translation()),
            ("connection lost in ctx.transaction", dropped_transaction_connection(dsn, db)),
        )
        for label, check in checks:
            problem = await check
            bugs += problem is not None
            print(f"{'BUG  ' if problem else 'FIXED'} {label}: {problem or 'ok'}")
    finally:
        await db.close()
    return 1 if bugs else 0


if __name__ == "__main__":
    folder = Path(tempfile.mkdtemp(prefix="tq", dir="/tmp"))
    server = embedded.start(folder)
    try:
        code = asyncio.run(main(server.uri))
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    sys.exit(code)
