"""Remotes for the remote-task tests: a second Tether server on a database of its own (it can
be stopped and started again on the same port), a FastMCP tasks server, and readers of what
the remote holds (its runs, one per task)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import uvicorn

from tether.app import create_app
from tether.runtime.operations import Operations
from tether.runtime.registry import App
from tether.settings import Settings
from tether.storage import pool


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def uvicorn_at(asgi_app: Any, port: int) -> AsyncIterator[None]:
    """Serve `asgi_app` on 127.0.0.1:`port` in this event loop until the block ends."""
    server = uvicorn.Server(
        uvicorn.Config(asgi_app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(30):
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.01)
        yield
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 30)


def tether_app(app: App, db_url: str, **settings: Any) -> Any:
    defaults: dict[str, Any] = {
        "database_url": db_url,
        "poll_s": 0.05,
        "poll_interval_ms": 100,
        "janitor_interval_s": 3600.0,
        "state_key": "test-key",
    }
    conf = Settings.model_validate({**defaults, **settings})
    return create_app(app, conf, db_url)


@dataclass
class Peer:
    """A remote Tether server: its URL, port and database (the test reads its runs there);
    `stop` and `start` take it down and bring it back on the same port."""

    app: App
    db_url: str
    port: int
    db: asyncpg.Pool
    _up: contextlib.AsyncExitStack | None = None

    async def start(self) -> None:
        stack = contextlib.AsyncExitStack()
        await stack.enter_async_context(self.serving())
        self._up = stack

    async def stop(self) -> None:
        stack, self._up = self._up, None
        if stack is not None:
            await stack.aclose()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def ops(self) -> Operations:
        return Operations(self.db, self.app)

    def serving(self) -> contextlib.AbstractAsyncContextManager[None]:
        """The server up for the block (again on the same port after a stop)."""
        return uvicorn_at(tether_app(self.app, self.db_url), self.port)

    async def runs(self, workflow: str) -> list[asyncpg.Record]:
        """Every run of `workflow` on the remote: one per remote task it created."""
        return list(
            await self.db.fetch(
                "SELECT id, status, cancel_requested FROM executions WHERE workflow = $1 "
                "ORDER BY created_at",
                workflow,
            )
        )

    async def one_run(self, workflow: str, *, timeout: float = 10.0) -> str:
        """The id of the single run of `workflow`, once it exists."""
        async with asyncio.timeout(timeout):
            while True:
                found = await self.runs(workflow)
                if found:
                    assert len(found) == 1, found
                    return str(found[0]["id"])
                await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def peer(app: App, db_url: str) -> AsyncIterator[Peer]:
    """A second Tether server for `app` on `db_url`, serving for the block."""
    db = await pool.create_pool(db_url, min_size=1, max_size=4)
    found = Peer(app, db_url, free_port(), db)
    try:
        await found.start()
        yield found
    finally:
        await found.stop()
        await db.close()


REPO = Path(__file__).resolve().parents[2]


@dataclass
class Process:
    """A remote server in a process of its own (`python FILE PORT [ARGS…]`), up on `port`
    while `start` … `kill` (SIGKILL: a crash, nothing kept in memory survives); `path`: its
    endpoint's path."""

    script: str
    port: int
    logs: Path
    proc: subprocess.Popen[bytes] | None = None
    args: tuple[str, ...] = ()
    path: str = "/mcp"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    async def start(self) -> None:
        with (self.logs / f"remote-{self.port}.log").open("ab") as log:
            self.proc = subprocess.Popen(  # noqa: ASYNC220 — started, not waited for
                [sys.executable, str(REPO / self.script), str(self.port), *self.args],
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        async with asyncio.timeout(30):
            while True:
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                except OSError:
                    assert self.proc.poll() is None, self.log()
                    await asyncio.sleep(0.05)
                    continue
                writer.close()
                await writer.wait_closed()
                return

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def log(self) -> str:
        return (self.logs / f"remote-{self.port}.log").read_text("utf-8", errors="replace")
