"""e2e fixtures: worker subprocesses, and a real Tether server (uvicorn on 127.0.0.1, port 0)
with a raw MCP client over loopback."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
import uvicorn

from tests.conftest import database_env
from tests.mcp_client import McpClient
from tether.app import create_app
from tether.runtime.registry import App
from tether.settings import Settings

REPO = Path(__file__).resolve().parents[2]


class Workers:
    """`python -m tether` subprocesses of a test (workers by default); whatever is still alive
    is killed on exit."""

    def __init__(self, db_url: str, logs: Path, app_spec: str) -> None:
        self.db_url = db_url
        self.logs = logs
        self.app_spec = app_spec
        self.procs: list[subprocess.Popen[bytes]] = []

    def spawn(self, label: str, *command: str, **env: str) -> subprocess.Popen[bytes]:
        """Start `tether COMMAND APP` (default: `worker APP`) with this test's database."""
        base = {k: v for k, v in os.environ.items() if k != "KILL_AT"}
        argv = list(command) if command else ["worker", self.app_spec]
        with (self.logs / f"{label}.log").open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tether", *argv],
                cwd=REPO,
                env={**base, **database_env(self.db_url), "TETHER_POLL_S": "0.1", **env},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.procs.append(proc)
        return proc

    def log(self, label: str) -> str:
        return (self.logs / f"{label}.log").read_text("utf-8", errors="replace")

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture
def workers(db_url: str, tmp_path: Path) -> Iterator[Workers]:
    ws = Workers(db_url, tmp_path, "tests/apps/killable.py:app")
    try:
        yield ws
    finally:
        ws.kill_all()


async def wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """The exit code, or None if the process is still running after `timeout` seconds."""
    try:
        return await asyncio.to_thread(proc.wait, timeout)
    except subprocess.TimeoutExpired:
        return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def on_loopback(
    asgi_app: Any,
    path: str = "/mcp",
    *,
    port: int = 0,
    lifespan: Literal["on", "off"] = "on",
    grace_s: int | None = None,
) -> AsyncIterator[str]:
    """Run an ASGI app with uvicorn on 127.0.0.1 (`port`, 0: a free one) in this event loop
    until the block ends; yields the URL of `path`. `grace_s`: how long the stop waits for
    open connections (a listen stream) before closing them (None: until they end)."""
    server = uvicorn.Server(
        uvicorn.Config(
            asgi_app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan=lifespan,
            timeout_graceful_shutdown=grace_s,
        )
    )
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(30):
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.01)
        bound = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{bound}{path}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 30)


def server_settings(db_url: str, **settings: Any) -> Settings:
    """A test server's settings on `db_url`: quick polls, no janitor round during a test, a
    fixed state key; `settings` override them."""
    defaults: dict[str, Any] = {
        "database_url": db_url,
        "poll_s": 0.05,
        "poll_interval_ms": 100,
        "janitor_interval_s": 3600.0,
        "state_key": "test-key",
    }
    return Settings.model_validate({**defaults, **settings})


@contextlib.asynccontextmanager
async def serve(app: App, db_url: str, **settings: Any) -> AsyncIterator[str]:
    """Run Tether for `app` on 127.0.0.1 (free port) in this event loop; yields the MCP URL."""
    conf = server_settings(db_url, **settings)
    async with on_loopback(create_app(app, conf, db_url), conf.mcp_path) as url:
        yield url


ServeFn = Callable[..., contextlib.AbstractAsyncContextManager[str]]


@pytest.fixture
def mcp_server(db_url: str) -> ServeFn:
    """`async with mcp_server(app) as url:` — a real server on loopback for this test."""

    def _serve(app: App, **settings: Any) -> contextlib.AbstractAsyncContextManager[str]:
        return serve(app, db_url, **settings)

    return _serve


@pytest.fixture
async def client() -> AsyncIterator[Callable[[str], McpClient]]:
    clients: list[McpClient] = []

    def make(url: str) -> McpClient:
        c = McpClient(url)
        clients.append(c)
        return c

    yield make
    for c in clients:
        await c.aclose()
