"""Processes under test: the PostgreSQL server and `tether serve` / `tether worker` children.

Everything started here is registered in one `Cluster`; `Cluster.close()` (also run on Ctrl-C
and SIGTERM by the driver) kills whatever is still alive. Readiness is bounded polling of
`/healthz` (`listening: true` means the pool and the LISTEN connection are up).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tether.storage import embedded

REPO = Path(__file__).resolve().parents[1]
APP_SPEC = "reliability/app.py:app"
LOOPBACK = "127.0.0.1"


async def poll_until(
    check: Callable[[], Awaitable[bool]], timeout: float, what: str, every: float = 0.05
) -> float:
    """Bounded polling: return the seconds it took `check()` to hold; TimeoutError naming
    `what` when it does not within `timeout`."""
    t0 = time.monotonic()
    try:
        async with asyncio.timeout(timeout):
            while True:
                if await check():
                    return time.monotonic() - t0
                await asyncio.sleep(every)
    except TimeoutError:
        raise TimeoutError(f"{what}: not within {timeout:g}s") from None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        port: int = s.getsockname()[1]
        return port


STOP_CMD = "TETHER_PG_STOP_CMD"
START_CMD = "TETHER_PG_START_CMD"


class Postgres:
    """The database: embedded (pgserver, controllable with pg_ctl) or TETHER_DATABASE_URL,
    controllable when TETHER_PG_STOP_CMD and TETHER_PG_START_CMD give the shell commands that
    stop and start that server (e.g. `pg_ctlcluster 16 rel stop -m fast`)."""

    def __init__(self) -> None:
        external = os.environ.get("TETHER_DATABASE_URL")
        self.folder: Path | None = None
        self._server: embedded.EmbeddedServer | None = None
        self._stop_cmd = os.environ.get(STOP_CMD, "").strip()
        self._start_cmd = os.environ.get(START_CMD, "").strip()
        if external:
            self.uri = external
            return
        self.folder = Path(tempfile.mkdtemp(prefix="tr", dir="/tmp"))
        self._server = embedded.start(self.folder)
        self.uri = self._server.uri

    @property
    def external(self) -> bool:
        return self._server is None

    @property
    def controllable(self) -> bool:
        return self._server is not None or bool(self._stop_cmd and self._start_cmd)

    @property
    def why_not_controllable(self) -> str:
        return (
            f"TETHER_DATABASE_URL is external and {STOP_CMD} / {START_CMD} are not both set:"
            " the suite cannot stop and start that PostgreSQL"
        )

    def _shell(self, command: str, timeout: float = 120.0) -> None:
        """Run the operator's stop/start command (a shell command line given in the env)."""
        subprocess.run(  # noqa: S602 — the operator's own command, from the environment
            command, shell=True, check=True, timeout=timeout, stdin=subprocess.DEVNULL
        )

    @property
    def pgdata(self) -> Path:
        assert self.folder is not None
        return (self.folder / "pg").resolve()

    def _pg_ctl(self, *args: str, timeout: float = 90.0) -> None:
        from pgserver._commands import POSTGRES_BIN_PATH

        user = "pgserver" if os.geteuid() == 0 else None
        cmd = [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.pgdata), *args]
        # Not pipes: the postmaster pg_ctl starts inherits them and would keep them open.
        with (self.pgdata.parent / "pg_ctl.out").open("ab") as out:
            subprocess.run(
                cmd,
                check=True,
                user=user,
                timeout=timeout,
                stdout=out,
                stderr=out,
                stdin=subprocess.DEVNULL,
            )

    def _socket_dir(self) -> str:
        # postmaster.pid line 5 is the unix socket directory of the running server.
        lines = (self.pgdata / "postmaster.pid").read_text("utf-8").splitlines()
        return lines[4]

    def restart(self) -> None:
        """`pg_ctl restart -m fast` (postmaster.opts keeps the socket options); an external
        server: its stop command, then its start command."""
        if self.external:
            self._shell(self._stop_cmd)
            self._shell(self._start_cmd)
            return
        self._pg_ctl("-w", "-m", "fast", "restart", "-l", str(self.pgdata / "log"))

    def stop(self) -> str:
        """Stop the server (fast mode); returns the socket dir to start it with again."""
        if self.external:
            self._shell(self._stop_cmd)
            return ""
        sock = self._socket_dir()
        self._pg_ctl("-w", "-m", "fast", "stop")
        return sock

    def start(self, socket_dir: str) -> None:
        if self.external:
            self._shell(self._start_cmd)
            return
        self._pg_ctl(
            "-w", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(self.pgdata / "log"), "start"
        )

    def close(self) -> None:
        if self._server is not None:
            try:
                self._server.stop()
            except Exception:  # noqa: BLE001 — best effort at exit; report and go on
                print("warning: embedded PostgreSQL did not stop cleanly", file=sys.stderr)
            self._server = None
            # After a pg_ctl restart pgserver's handle knows a stale postmaster pid and leaves
            # the new one running: stop whatever still runs on this data directory.
            if (self.pgdata / "postmaster.pid").exists():
                try:
                    self._pg_ctl("-w", "-m", "fast", "stop", timeout=60)
                except (subprocess.SubprocessError, OSError):
                    print(
                        "warning: PostgreSQL under", self.pgdata, "may still run", file=sys.stderr
                    )
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


@dataclass
class Proc:
    """One `tether serve|worker` child; restartable under the same label and port."""

    label: str
    kind: str  # serve | worker
    port: int | None
    env: dict[str, str]
    logs: Path
    popen: subprocess.Popen[bytes] | None = None
    starts: int = 0
    down_since: float | None = None  # monotonic; None while up and ready
    down_windows: list[tuple[float, float | None]] = field(default_factory=list)

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def base(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.logs / f"{self.label}.log"

    def spawn(self) -> None:
        args = [sys.executable, "-m", "tether", self.kind, APP_SPEC]
        if self.kind == "serve":
            args += ["--host", LOOPBACK, "--port", str(self.port)]
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"\n=== start {self.starts} at {time.time():.3f}\n".encode())
            log.flush()
            self.popen = subprocess.Popen(
                args,
                cwd=REPO,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def mark_down(self) -> None:
        now = time.monotonic()
        self.down_since = now
        self.down_windows.append((now, None))

    def mark_up(self) -> None:
        if self.down_since is not None and self.down_windows:
            start, _ = self.down_windows[-1]
            self.down_windows[-1] = (start, time.monotonic())
        self.down_since = None

    def was_down(self, t0: float, t1: float, slack: float = 0.05) -> bool:
        """Was this process killed or not yet ready at any moment of [t0, t1]?"""
        return any(
            start <= t1 + slack and (end is None or end >= t0 - slack)
            for start, end in self.down_windows
        )

    def kill(self) -> None:
        if self.alive:
            assert self.popen is not None
            self.mark_down()
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait(timeout=30)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text("utf-8", errors="replace")
        except OSError:
            return ""


async def wait_ready(proc: Proc, timeout: float = 60.0) -> float:
    """Bounded polling until the process is ready; returns the seconds it took."""
    t0 = time.monotonic()
    if proc.kind == "worker":
        # A worker has no HTTP: ready once its log says so for this start.
        marker = "running"
        async with asyncio.timeout(timeout):
            while True:
                if not proc.alive:
                    raise RuntimeError(f"{proc.label} exited:\n{proc.log_text()[-3000:]}")
                text = proc.log_text()
                last = text.rsplit("=== start", 1)[-1]
                if marker in last and "worker" in last:
                    proc.mark_up()
                    return time.monotonic() - t0
                await asyncio.sleep(0.05)
    base = f"http://{LOOPBACK}:{proc.port}"
    async with httpx.AsyncClient(timeout=2.0) as http, asyncio.timeout(timeout):
        while True:
            if not proc.alive:
                raise RuntimeError(f"{proc.label} exited:\n{proc.log_text()[-3000:]}")
            try:
                resp = await http.get(f"{base}/healthz")
                if resp.status_code == 200 and resp.json().get("listening"):
                    proc.mark_up()
                    return time.monotonic() - t0
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)


async def healthz(proc: Proc, timeout: float = 5.0) -> dict[str, Any] | None:
    try:
        async with httpx.AsyncClient(timeout=timeout) as http:
            resp = await http.get(f"http://{LOOPBACK}:{proc.port}/healthz")
        body: dict[str, Any] = resp.json()
        return body if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


class Cluster:
    """N servers and M workers on one database; every child is killed by close()."""

    def __init__(self, db_uri: str, logs: Path, *, servers: int, workers: int, **env: str):
        self.db_uri = db_uri
        self.logs = logs
        base = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
        common = {
            **base,
            "TETHER_DATABASE_URL": db_uri,
            "TETHER_POLL_S": "0.2",
            "TETHER_POLL_INTERVAL_MS": "200",
            "TETHER_LEASE_S": "5",
            "TETHER_STATE_KEY": "reliability",
            "TETHER_JANITOR_INTERVAL_S": "3600",
            "TETHER_WORKERS": "16",
            "TETHER_POOL_SIZE": "10",
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        self.servers = [
            Proc(f"serve{i + 1}", "serve", free_port(), dict(common), logs) for i in range(servers)
        ]
        self.workers = [
            Proc(f"worker{i + 1}", "worker", None, dict(common), logs) for i in range(workers)
        ]

    @property
    def procs(self) -> list[Proc]:
        return [*self.servers, *self.workers]

    async def start(self) -> None:
        for proc in self.procs:
            proc.spawn()
        await asyncio.gather(*(wait_ready(p) for p in self.procs))

    async def restart(self, proc: Proc) -> float:
        """Spawn `proc` again and wait until it is ready; returns the seconds to ready."""
        proc.spawn()
        return await wait_ready(proc)

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM everything, then SIGKILL whatever did not exit within `grace`."""
        for proc in self.procs:
            if proc.alive:
                assert proc.popen is not None
                proc.popen.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.procs:
            if proc.popen is None:
                continue
            try:
                proc.popen.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait(timeout=10)

    def close(self) -> None:
        for proc in self.procs:
            if proc.alive:
                assert proc.popen is not None
                proc.popen.kill()
                proc.popen.wait(timeout=10)
