"""`tether serve`, `tether worker`, `tether migrate`: the long-running processes."""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import signal
from collections.abc import Callable, Coroutine
from typing import Any

from tether import gc_tuning
from tether.console import PREFIX as CONSOLE_PREFIX
from tether.database_url import database_url
from tether.loader import load_app
from tether.observability import metrics, tracing
from tether.observability.exposition import Scrape, serving
from tether.runtime import health
from tether.runtime.service import migrate_database, running
from tether.settings import Settings

logger = logging.getLogger("tether")


def with_db(
    settings: Settings,
    fn: Callable[[str], Coroutine[Any, Any, int]],
    *,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
) -> int:
    """Run `fn(dsn)` against the configured database (starting the embedded one if needed),
    on a loop from `loop_factory` (None: asyncio's own)."""
    with database_url(settings) as dsn, asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(fn(dsn))


def server_loop() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop `tether serve` runs on, which `tether worker` runs on too: uvicorn's
    `auto` picks uvloop where it is installed (a dependency except on Windows), else asyncio's
    own (None). One loop for both, so a run behaves and performs alike in either process."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def serve(args: argparse.Namespace, settings: Settings, log_level: str) -> int:
    import uvicorn

    from tether.app import create_app

    app = load_app(settings.app)
    with database_url(settings) as dsn:
        web = create_app(app, settings, dsn, run_workers=not args.no_workers, tune_gc=True)
        # Keep idle connections longer than clients do (httpx: 5 s), so a client never reuses
        # a connection the server is closing at that instant (a spurious ReadError).
        config = uvicorn.Config(
            web,
            host=settings.host,
            port=settings.port,
            log_level=log_level.lower(),
            lifespan="on",
            timeout_keep_alive=settings.keep_alive_s,
            access_log=settings.access_log,  # costs 8-13 % of tasks/get throughput
        )
        server = uvicorn.Server(config)
        # uvicorn shuts down gracefully on SIGINT/SIGTERM and then raises the signal again;
        # with the default handlers that kills the process (SIGTERM) or raises
        # KeyboardInterrupt (SIGINT) before the embedded PostgreSQL is stopped.
        signal.signal(signal.SIGTERM, _exit_on_signal)
        signal.signal(signal.SIGINT, _exit_on_signal)
        try:
            server.run()
        except SystemExit as exc:
            return int(exc.code or 0)
    return 0


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def worker(settings: Settings) -> int:
    app = load_app(settings.app)
    metrics.enabled = settings.metrics
    tracing.configure()

    async def run(dsn: str) -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with running(
            dsn,
            app,
            worker_settings=settings.worker_settings(),
            janitor_interval_s=settings.janitor_interval_s,
            pool_size=settings.pool_size,
            dags_dir=settings.dags,
            dags_reload_s=settings.dags_reload_s,
            protocols_dir=settings.protocols,
            encryption=settings.encryption(),
            dag_env_passthrough=settings.dag_environment(),
            notify=settings.notify_setup(CONSOLE_PREFIX),
        ) as rt:
            logger.info(
                "worker %s running %d workflows (event loop: %s)",
                rt.workers[0].owner,
                len(app.workflows),
                type(loop).__module__.split(".")[0],
            )
            gc_tuning.tune_gc()
            scrape = Scrape(functools.partial(health.snapshot, rt))
            async with serving(settings.host, settings.metrics_port, scrape):
                await stop.wait()
        return 0

    return with_db(settings, run, loop_factory=server_loop())


async def run_migrations(dsn: str) -> int:
    applied = await migrate_database(dsn)
    print(f"applied {applied}" if applied else "up to date")
    return 0
