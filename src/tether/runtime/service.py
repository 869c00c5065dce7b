"""Runtime: one process's pool, listener, workers and janitor, with a clean lifecycle.

The one place above storage where the concrete database pieces (asyncpg pool, LISTEN
connection, migrations) are constructed; everything else in the runtime receives them as the
`storage.driver` Protocols, and surfaces (the CLI included) come here instead of to storage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from tether.runtime import janitor
from tether.runtime.operations import Operations
from tether.runtime.operations.storage_errors import storage_errors
from tether.runtime.registry import App
from tether.runtime.worker import Worker, WorkerSettings
from tether.storage import migrate, pool
from tether.storage.driver import Database
from tether.storage.notify import Listener

logger = logging.getLogger(__name__)


@dataclass
class Runtime:
    pool: Database
    listener: Listener
    ops: Operations
    workers: list[Worker] = field(default_factory=list)


async def migrate_database(dsn: str) -> list[int]:
    """Apply pending migrations on `dsn`; return the versions applied now (empty when up to
    date). Raises StorageError (DatabaseUnavailable when the server cannot be reached)."""
    conn = await pool.connect(dsn)
    try:
        return await migrate.migrate(conn)
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def database(dsn: str, *, pool_size: int = 2) -> AsyncIterator[Database]:
    """A small pool of its own (one-shot commands: `tether tokens …`, `tether audit`), after
    applying pending migrations; closed on exit. Raises Unavailable."""
    with storage_errors():
        await migrate_database(dsn)
        db: Database = await pool.create_pool(dsn, min_size=1, max_size=pool_size)
    try:
        yield db
    finally:
        await db.close()


@contextlib.asynccontextmanager
async def operations(dsn: str, app: App, *, pool_size: int = 2) -> AsyncIterator[Operations]:
    """Operations over a small pool of their own, without workers or a listener (one-shot
    commands: `tether runs …`); the pool is closed on exit."""
    db: Database = await pool.create_pool(dsn, min_size=1, max_size=pool_size)
    try:
        yield Operations(db, app)
    finally:
        await db.close()


@contextlib.asynccontextmanager
async def running(
    dsn: str,
    app: App,
    *,
    worker_settings: WorkerSettings | None = None,
    workers: int = 1,
    janitor_interval_s: float | None = 60.0,
    pool_size: int = 20,
    max_payload_bytes: int = 256 * 1024,
    run_migrations: bool = True,
    audit_retention_days: float | None = None,
) -> AsyncIterator[Runtime]:
    """Migrate, open the pool and listener, start `workers` claim loops and the janitor; on
    exit stop the workers (leases handed back), the listener and the pool."""
    if run_migrations:
        await migrate_database(dsn)
    db: Database = await pool.create_pool(dsn, min_size=1, max_size=pool_size)
    listener = Listener(dsn)
    rt = Runtime(
        db, listener, Operations(db, app, listener=listener, max_payload_bytes=max_payload_bytes)
    )
    try:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(listener.run(), name="tether-listener")
            for _ in range(workers):
                worker = Worker(db, app, worker_settings, listener=listener)
                rt.workers.append(worker)
                tg.create_task(worker.run(), name=f"tether-worker-{worker.owner}")
            sweeper = (
                tg.create_task(
                    janitor.run(
                        db,
                        interval_s=janitor_interval_s,
                        audit_retention_days=audit_retention_days,
                    ),
                    name="tether-janitor",
                )
                if janitor_interval_s
                else None
            )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(10):
                    await listener.ready.wait()
            try:
                yield rt
            finally:
                for worker in rt.workers:
                    worker.stop()
                if sweeper is not None:
                    sweeper.cancel()
                listener.stop()
    finally:
        await db.close()
