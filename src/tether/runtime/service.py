"""Runtime: one process's pool, listener, workers and janitor, with a clean lifecycle.

The one place above storage where the concrete database pieces (asyncpg pool, LISTEN
connection, migrations) are constructed; everything else in the runtime receives them as the
`storage.driver` Protocols, and surfaces (the CLI included) come here instead of to storage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tether.runtime import janitor, payloads
from tether.runtime.admission import NO_ADMISSION, Admission
from tether.runtime.dag.reloader import DagReloader
from tether.runtime.notify.config import NotifySetup, SenderSettings, plan
from tether.runtime.notify.sender import Sender
from tether.runtime.operations import Operations
from tether.runtime.operations.storage_errors import storage_errors
from tether.runtime.registry import App
from tether.runtime.remote.config import Remote
from tether.runtime.remote.implementations import MISSING, PROTOCOLS
from tether.runtime.remote.poller import RemotePoller
from tether.runtime.scheduler import Scheduler, schedules
from tether.runtime.worker import Worker, WorkerSettings
from tether.storage import migrate, outbox, pool
from tether.storage.driver import Database
from tether.storage.notify import Listener

logger = logging.getLogger(__name__)


@dataclass
class Runtime:
    pool: Database
    listener: Listener
    ops: Operations
    workers: list[Worker] = field(default_factory=list)
    scheduler: Scheduler | None = None
    reloader: DagReloader | None = None
    sender: Sender | None = None
    poller: RemotePoller | None = None

    def stop(self) -> None:
        """Ask every loop to stop: workers hand their leases back, then the scheduler, the DAG
        reloader, the notification sender, the remote poller and the listener end."""
        for worker in self.workers:
            worker.stop()
        for loop in (self.scheduler, self.reloader, self.sender, self.poller):
            if loop is not None:
                loop.stop()
        self.listener.stop()


#: How this process connects to a database URL (pool.routed): surfaces that open the database
#: themselves (tether.client) install the settings' route with it.
routed = pool.routed


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
async def operations(
    dsn: str,
    app: App,
    *,
    pool_size: int = 2,
    listener: Listener | None = None,
    admission: Admission = NO_ADMISSION,
    encryption: payloads.Encryption | None = None,
    approver_roles: Mapping[str, frozenset[str]] | None = None,
) -> AsyncIterator[Operations]:
    """Operations over a small pool of their own, without workers (one-shot commands:
    `tether runs …`; `listener`, run by the caller, for `runs watch`; `admission`: the same
    queues and profiles as the servers; `encryption`: the keys payloads are sealed and opened
    with while the block runs; `approver_roles`: each approver role's members); the pool is
    closed on exit. Raises Unavailable when the database cannot be reached."""
    with payloads.installed(encryption):
        with storage_errors():
            db: Database = await pool.create_pool(dsn, min_size=1, max_size=pool_size)
        try:
            yield Operations(
                db, app, listener=listener, admission=admission, approver_roles=approver_roles
            )
        finally:
            await db.close()


async def rotate_keys(
    dsn: str,
    keys: payloads.KeyRing,
    *,
    batch: int = payloads.DEFAULT_BATCH,
    progress: payloads.Progress | None = None,
) -> payloads.RotationReport:
    """Re-seal every stored payload on `dsn` under `keys.current` (`tether keys rotate`; see
    payloads.rotate, which says what it raises)."""
    db: Database = await pool.create_pool(dsn, min_size=1, max_size=1)
    try:
        return await payloads.rotate(db, keys, batch=batch, progress=progress)
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
    dags_dir: str | Path | None = None,
    protocols_dir: str | Path | None = None,
    encryption: payloads.Encryption | None = None,
    audit_retention_days: float | None = None,
    dags_reload_s: float = 2.0,
    dag_env_passthrough: Iterable[str] | None = None,
    notify: NotifySetup | None = None,
    remotes: Iterable[Remote] = (),
    approver_roles: Mapping[str, frozenset[str]] | None = None,
) -> AsyncIterator[Runtime]:
    """Migrate, open the pool and listener, start `workers` claim loops, the janitor and (when
    a workflow has a schedule) the scheduler; on exit stop the workers (leases handed back),
    the scheduler, the listener and the pool. Queues, profiles and schedule settings come
    from `worker_settings.admission`; `encryption`: the keys payloads are sealed and opened
    with, and the read gate (payloads.installed); `audit_retention_days`: the janitor deletes
    older audit rows. `dags_dir`: DAG files, checked for changes every `dags_reload_s`.
    `protocols_dir`: Realm protocol workflows (`*.yaml`) registered before the tool catalog
    is built; a refused file is logged and skipped. `dag_env_passthrough`: the process
    variables stored DAGs see (`App.pass_dag_environment`; None: the App's own list).
    `notify`: the operator's notification channels, the sender's settings and the links
    messages carry (default: the app's channels, delivered without links); the routes of the
    app's and the operator's channels are stored at start, and their secrets read from the
    environment. `remotes`: the settings' remotes, each replacing the app's of that name; the
    remotes its workflows and DAGs call are checked before anything starts, and their HTTP
    client is closed on exit. `approver_roles`: each approver role's members
    (`TETHER_APPROVER_ROLES`).

    Raises:
        ValueError: `dag_env_passthrough` names a `TETHER_*` variable, or no variable; two
            notification channels share a name, or one's environment variable is unset or
            does not fit; or a workflow or DAG calls a remote that is not configured
            (RemoteConfigError, DagSpecError).
    """
    notify = notify if notify is not None else NotifySetup()
    if dag_env_passthrough is not None:
        app.pass_dag_environment(dag_env_passthrough)
    app.bind_remotes(remotes, implemented=PROTOCOLS, missing=MISSING)
    if protocols_dir is not None:
        for file, problem in app.load_protocols(protocols_dir).items():
            logger.error("protocol %s refused: %s", file, problem)
    if run_migrations:
        await migrate_database(dsn)
    with payloads.installed(encryption):
        try:
            async with _running(
                dsn,
                app,
                worker_settings,
                workers,
                janitor_interval_s,
                pool_size,
                max_payload_bytes,
                DagReloader(app, dags_dir, dags_reload_s) if dags_dir is not None else None,
                audit_retention_days,
                notify,
                approver_roles,
            ) as rt:
                yield rt
        finally:
            await app.remote_clients.aclose()


@contextlib.asynccontextmanager
async def _running(
    dsn: str,
    app: App,
    worker_settings: WorkerSettings | None,
    workers: int,
    janitor_interval_s: float | None,
    pool_size: int,
    max_payload_bytes: int,
    reloader: DagReloader | None,
    audit_retention_days: float | None,
    notify: NotifySetup,
    approver_roles: Mapping[str, frozenset[str]] | None = None,
) -> AsyncIterator[Runtime]:
    if reloader is not None:
        reloader.scan()  # before the scheduler and the tool catalog look at the workflows
    routes, channels = plan([*app.notifications.routed, *notify.channels])
    resolved = {name: c.resolve(os.environ) for name, c in channels.items()}
    db: Database = await pool.create_pool(dsn, min_size=1, max_size=pool_size)
    listener = Listener(dsn)
    admission = (worker_settings or WorkerSettings()).admission
    ops = Operations(
        db,
        app,
        listener=listener,
        max_payload_bytes=max_payload_bytes,
        admission=admission,
        approver_roles=approver_roles,
    )
    rt = Runtime(db, listener, ops, reloader=reloader)
    try:
        if notify.sender is not None and resolved:
            rt.sender = Sender(db, resolved, notify.links, notify.sender, listener=listener)
        with storage_errors():
            await outbox.set_routes(db, routes)
        async with asyncio.TaskGroup() as tg:
            tg.create_task(listener.run(), name="tether-listener")
            for _ in range(workers):
                worker = Worker(db, app, worker_settings, listener=listener)
                rt.workers.append(worker)
                ops.env.takers.append(worker)
                tg.create_task(worker.run(), name=f"tether-worker-{worker.owner}")
            sweeper = (
                tg.create_task(
                    janitor.run(
                        db,
                        interval_s=janitor_interval_s,
                        audit_retention_days=audit_retention_days,
                        notify_retention_s=(notify.sender or SenderSettings()).retention_s,
                    ),
                    name="tether-janitor",
                )
                if janitor_interval_s
                else None
            )
            _start_loops(tg, rt, app, admission.scheduler)
            if workers and app.remotes:
                ws = worker_settings or WorkerSettings()
                rt.poller = RemotePoller(
                    db, app.remotes, app.remote_clients, poll_s=ws.poll_s, lease_s=ws.lease_s
                )
                tg.create_task(rt.poller.run(), name="tether-remote-poller")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(10):
                    await listener.ready.wait()
            try:
                yield rt
            finally:
                rt.stop()
                if sweeper is not None:
                    sweeper.cancel()
    finally:
        await db.close()


def _start_loops(tg: asyncio.TaskGroup, rt: Runtime, app: App, scheduler: bool) -> None:
    """The DAG reloader (with `--dags`), the cron scheduler (when a workflow has a schedule
    and this process runs one) and the notification sender (when there are channels)."""
    if rt.reloader is not None:
        tg.create_task(rt.reloader.run(), name="tether-dag-reloader")
    if rt.sender is not None:
        tg.create_task(rt.sender.run(), name="tether-notify-sender")
    if scheduler and schedules(app.workflows):
        rt.scheduler = Scheduler(rt.ops.env)
        tg.create_task(rt.scheduler.run(), name="tether-scheduler")
