"""`tether serve`, `tether worker`, `tether migrate`: the long-running processes.

`serve` binds its port first (a port in use is one line, before anything starts), runs the
app's lifespan (the runtime) around uvicorn itself, so a failure to start is an exception the
CLI reports in one line, and logs one banner once it serves. Both servers stop in two steps on
signals (`cli/stopping.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import signal
import socket
import sys
import threading
from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, Final

from tether import gc_tuning
from tether.cli import banner
from tether.cli.errors import Failed
from tether.cli.loaded import Loaded, served
from tether.cli.stopping import Stopping
from tether.console import PREFIX as CONSOLE_PREFIX
from tether.database_url import database_url
from tether.database_url import start as start_database
from tether.observability import metrics, tracing
from tether.observability.exposition import Scrape, serving
from tether.runtime import health
from tether.runtime.service import Runtime, migrate_database, running
from tether.settings import Settings
from tether.tools import offload

if TYPE_CHECKING:
    import argparse

    import uvicorn
    from starlette.applications import Starlette

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


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to `host`:`port` (uvicorn listens on it).

    Raises:
        Failed: the address cannot be bound (in use, not this machine's, not permitted).
    """
    bare = host.strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in bare else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((bare, port))
    except OSError as exc:
        sock.close()
        reason = exc.strerror or str(exc)
        raise Failed(
            f"cannot listen on {banner.base_url(host, port)}: {reason} "
            "(pass --port or set TETHER_PORT, --host or TETHER_HOST)"
        ) from exc
    return sock


STOP_NOW_S: Final = 2.0  # what stopping at once still waits for the document worker to end


def stop_now(stop_database: Callable[[], None]) -> Callable[[], None]:
    """What a second signal does to `serve` before the process exits at once: end the document
    worker (a child process, which an exit that skips the server's shutdown would leave
    behind) and let the database go. The worker is asked from a helper thread, waited for at
    most STOP_NOW_S: the signal may have interrupted this thread while it held the worker's
    lock."""

    def stop() -> None:
        helper = threading.Thread(
            target=offload.shutdown, kwargs={"wait": True}, name="tether-stop-now", daemon=True
        )
        helper.start()
        helper.join(STOP_NOW_S)
        stop_database()

    return stop


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    loop.call_soon_threadsafe(callback)


def _in_flight(rt: Runtime | None) -> int:
    return sum(worker.in_flight for worker in rt.workers) if rt is not None else 0


def serve(args: argparse.Namespace, settings: Settings, log_level: str, loaded: Loaded) -> int:
    """`tether serve`: the exit code (0, or 128 + the signal that stopped it)."""
    import uvicorn

    from tether.app import create_app

    app = loaded.load(
        settings, dags=False, protocols=False
    )  # the runtime loads the DAGs and protocols
    sock = listen(settings.host, settings.port)
    try:
        database = start_database(settings)
    except BaseException:
        sock.close()
        raise
    try:
        web = create_app(app, settings, database.dsn, run_workers=not args.no_workers, tune_gc=True)
        # Keep idle connections longer than clients do (httpx: 5 s), so a client never reuses
        # a connection the server is closing at that instant (a spurious ReadError).
        config = uvicorn.Config(
            web,
            log_level=log_level.lower(),
            lifespan="off",  # run here, around the server: see _serve
            timeout_keep_alive=settings.keep_alive_s,
            # open connections (a listen stream) get the runs' grace, then are closed
            timeout_graceful_shutdown=math.ceil(settings.shutdown_grace_s),
            access_log=settings.access_log,  # costs 8-13 % of tasks/get throughput
        )
        port = int(sock.getsockname()[1])

        def started() -> None:
            text = banner.banner(settings, port, settings.app, served(app))
            logger.info("%s", text)

        server = _server(config, started)
        stopping = Stopping(
            lambda: setattr(server, "should_exit", True),
            lambda: _in_flight(getattr(web.state, "runtime", None)),
            grace_s=settings.shutdown_grace_s,
            lease_s=settings.lease_s,
            stop_now=stop_now(database.stop),
        )
        with stopping.installed():
            _run(_serve(web, server, sock), config.get_loop_factory())
    finally:
        sock.close()
        database.stop()
    return _stopped(stopping)


def _run(
    main: Coroutine[Any, Any, None], loop_factory: Callable[[], asyncio.AbstractEventLoop] | None
) -> None:
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(main)


async def _serve(web: Starlette, server: uvicorn.Server, sock: socket.socket) -> None:
    """The app's lifespan (the runtime up, then down after the server has stopped) around
    uvicorn serving on `sock`; an error starting the runtime is raised from here."""
    async with web.router.lifespan_context(web):
        await server.serve(sockets=[sock])


def _server(config: uvicorn.Config, on_started: Callable[[], None]) -> uvicorn.Server:
    """uvicorn's server, with the signals left to `Stopping` and `on_started` called once it
    serves (uvicorn is imported here: only `serve` needs it)."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Generator[None, None, None]:
            yield  # `Stopping` handles them, through the lifespan's shutdown too

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                on_started()

    return Server(config)


def _stopped(stopping: Stopping) -> int:
    """The last line of a server stopped by a signal; the exit code."""
    if stopping.signal is not None:
        why = "interrupted" if stopping.signal == signal.SIGINT else "terminated"
        print(f"tether: {why}; stopped", file=sys.stderr, flush=True)
    return stopping.exit_code


def worker(settings: Settings, loaded: Loaded) -> int:
    """`tether worker`: the exit code, 0 once a signal has stopped it cleanly (as it always
    has: a service manager's stop is its normal end); a second signal exits at once with
    128 + the first signal's number."""
    app = loaded.load(
        settings, dags=False, protocols=False
    )  # the runtime loads the DAGs and protocols
    metrics.enabled = settings.metrics
    tracing.configure()
    database = start_database(settings)
    runtime: list[Runtime] = []

    async def run(dsn: str, stop: asyncio.Event) -> None:
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
            remotes=settings.remote_configs(),
        ) as rt:
            runtime.append(rt)
            logger.info(
                "worker %s running %s (event loop: %s)",
                rt.workers[0].owner,
                served(app),
                type(asyncio.get_running_loop()).__module__.split(".")[0],
            )
            gc_tuning.tune_gc()
            scrape = Scrape(functools.partial(health.snapshot, rt))
            async with serving(settings.host, settings.metrics_port, scrape):
                await stop.wait()

    try:
        with asyncio.Runner(loop_factory=server_loop()) as runner:
            loop = runner.get_loop()
            stop = asyncio.Event()
            stopping = Stopping(
                lambda: _call_soon(loop, stop.set),
                lambda: _in_flight(runtime[0] if runtime else None),
                grace_s=settings.shutdown_grace_s,
                lease_s=settings.lease_s,
                stop_now=database.stop,
            )
            with stopping.installed():
                runner.run(run(database.dsn, stop))
    finally:
        database.stop()
    _stopped(stopping)
    return 0


async def run_migrations(dsn: str) -> int:
    applied = await migrate_database(dsn)
    print(f"applied {applied}" if applied else "up to date")
    return 0
