"""Remotes for the remote-task tests: a second Tether server on a database of its own (it can
be stopped and started again on the same port), a remote server in a process of its own, and
readers of what the remote holds (its runs, one per task) and of what our run recorded of the
call (its output, the remote's task id)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from tests.e2e.conftest import free_port, on_loopback, server_settings
from tether.app import create_app
from tether.runtime.operations import Operations
from tether.runtime.registry import App
from tether.storage import pool
from tether.testing.databases import Databases


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

    def serving(self) -> contextlib.AbstractAsyncContextManager[str]:
        """The server up for the block (again on the same port after a stop); a stop closes
        the listen streams a requester holds open after a second, as `tether serve` does
        after its shutdown grace."""
        asgi = create_app(self.app, server_settings(self.db_url), self.db_url)
        return on_loopback(asgi, port=self.port, grace_s=1)

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
async def peer(app: App, databases: Databases) -> AsyncIterator[Peer]:
    """A second Tether server for `app`, serving for the block, on a database of its own
    (created for the block, dropped after)."""
    db_url = await databases.create()
    try:
        db = await pool.create_pool(db_url, min_size=1, max_size=4)
        found = Peer(app, db_url, free_port(), db)
        try:
            await found.start()
            yield found
        finally:
            await found.stop()
            await db.close()
    finally:
        await databases.drop(db_url)


async def completed(ops: Operations, run: str, *, timeout: float = 30.0) -> Any:
    """The output of `run` once it ends; the test fails unless it completed."""
    view = await ops.wait_for_end(run, timeout=timeout)
    assert view.current.status == "completed", (view.current.status, view.current.error)
    return view.current.output


async def remote_task(ops: Operations, run: str, *, timeout: float = 30.0) -> str:
    """The remote's task id, as `run` recorded it (before its first poll)."""
    async with asyncio.timeout(timeout):
        while True:
            for step in await ops.steps(run):
                if step.kind == "remote" and step.result.get("task"):
                    return str(step.result["task"])
            await asyncio.sleep(0.02)


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

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Process]:
        """Up for the block, killed after."""
        await self.start()
        try:
            yield self
        finally:
            self.kill()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def log(self) -> str:
        return (self.logs / f"remote-{self.port}.log").read_text("utf-8", errors="replace")
