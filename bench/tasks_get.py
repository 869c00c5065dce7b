"""`tasks/get` under load on loopback, against ceilings measured in the same run.

What is measured
----------------
Every server is its own process with the same uvicorn settings (bench/tasks_get_ceilings.py:
one worker, default loop and HTTP implementation — uvloop and httptools, which Tether depends
on — no access log, log level warning), and the load comes from a separate process
(bench/loadgen.py: closed loop, one keep-alive connection per lane, a raw asyncio HTTP/1.1
client). For each concurrency (default 1, 16, 64), each target
gets ``warmup`` + ``duration`` seconds of the same request sent back to back; only requests
started after the warm-up count. Targets, measured in this order at each concurrency:

* ``fixed``: Starlette returning a fixed 500-byte body: the HTTP stack's ceiling (and the
  load generator's, on it);
* ``select``: Starlette doing one asyncpg primary-key select of the parked run's row and
  returning orjson of it: the ceiling of a handler that reads one row;
* ``tether working`` / ``tether completed``: Tether's ``tasks/get`` for a run parked on a
  signal (task ``working``) and for a completed run (task ``completed``, result inlined);
* ``fastmcp working`` / ``fastmcp completed``: ``fastmcp[tasks]==4.1.4``'s ``tasks/get`` on its
  in-memory Docket backend, for a tool sleeping for an hour and for a tool that returned;
  ``… asyncio``: the same FastMCP server on asyncio's event loop and h11 (uvicorn's choice
  where uvloop and httptools are not installed). FastMCP's side of each ratio is the faster
  of its two stacks in that round.

Every target gets the same request shape: a 2026-07-28 ``tasks/get`` with the headers
MCP-Protocol-Version, Mcp-Method and Mcp-Name and the ``_meta`` the protocol requires
(capabilities: the Tasks extension only). The ceilings ignore the headers; ``select`` reads
``params.taskId`` from the body. Each target's answer is checked once before its load, and
every answer under load must be 200 and carry the expected ``"status"``.

Per measurement: requests/s, nearest-rank p50/p99 latency, errors, response size, the
server's RSS at the start and end of the window (and its maximum, sampled every 0.25 s), and
the CPU used during the window by the server, PostgreSQL (postmaster and backends) and the
load generator, in % of one core. With ``--rounds N`` every concurrency gets N passes over
the targets and each ratio is the median of the per-pass ratios (each pass measures the
ceilings next to the system measured against them).

Extra rows at concurrency 16: the fixed server with an httpx client (why the load generator
is raw asyncio), and ``python -m tether serve`` as shipped (uvicorn log level info, access log
off by default, output to a file), paired per round with the benchmark's Tether server.

Row-count independence (skip with ``--skip-million``): 1,000 filler rows (completed runs with
random ``ex_`` ids) are added to the benchmark's database, and a second database of the same
cluster gets 1,000,000 (then VACUUM ANALYZE and CHECKPOINT); each database gets a fresh
Tether server of its own, which parks a run. The two ``tether working`` loads are measured
once each unrecorded (the fill's aftermath settles), then in 16 interleaved pairs of short
windows (3 s after the warm-up, ABBA order) so that machine drift cancels out; the median
1M/1k ratio is printed with the buffers the primary-key lookup touches at each size (EXPLAIN
ANALYZE). ``--rows-only`` runs just this part.

Targets, checked at concurrency 16: Tether >= 0.8x the select ceiling's req/s and p99 <= 1.5x
its p99; >= 2x FastMCP's req/s for a working task and >= 4x for a completed one (printed with
the select ceiling's own ratio to FastMCP: the most Tether could reach); RSS <= 80 MB and flat
(growth after the first window at the top concurrency <= 5 MB); 1M/1k within 10%.

The machine is shared and noisy (2 cores hold PostgreSQL, the server and the load
generator), so the figures that count are the ratios against the ceilings of the same run.
The benchmark reports; it does not fail on a missed target.

Usage::

    python bench/tasks_get.py [--duration 10] [--concurrency 1 16 64] [--rounds 1]
                              [--skip-fastmcp] [--skip-million | --rows-only] [--warmup 1]

An embedded PostgreSQL (pgserver) is started in a fresh directory under /tmp and removed at
the end. FastMCP needs ``pip install 'fastmcp[tasks]==4.1.4'`` in this interpreter (without
it, its rows are skipped with a note).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import importlib.util
import itertools
import json
import os
import platform
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import orjson
import psutil

from tether.storage import embedded, migrate, pool

BENCH = Path(__file__).resolve().parent
CEILINGS = BENCH / "tasks_get_ceilings.py"
LOADGEN = BENCH / "loadgen.py"
APP_SPEC = f"{BENCH / 'tasks_get_app.py'}:app"
HOST = "127.0.0.1"
PATH = "/mcp"
ASYNCIO_FASTMCP = "fastmcp-asyncio"  # tasks_get_ceilings.py: FastMCP on asyncio + h11
SELECT_PER_LANE = "select, row per lane"
TETHER_PER_LANE = "tether, run per lane"

VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
CAPS = {"extensions": {TASKS: {}}}

TETHER_WORKERS = 2
READY_TIMEOUT_SEC = 60.0
SETUP_TIMEOUT_SEC = 30.0
STOP_GRACE_SEC = 5.0
SAMPLE_EVERY_SEC = 0.25
LOADGEN_SLACK_SEC = 60.0
FILL_TIMEOUT_SEC = 1800.0
SLEEPER_SECONDS = 3600.0

TARGET_CONCURRENCY = 16
TARGET_SELECT_RATIO = 0.8
TARGET_FASTMCP_WORKING = 2.0
TARGET_FASTMCP_COMPLETED = 4.0
TARGET_P99_RATIO = 1.5
TARGET_RSS_MB = 80.0
TARGET_RSS_GROWTH_MB = 5.0
TARGET_ROWS_DRIFT = 0.10
FILL_SMALL = 1_000
FILL_LARGE = 1_000_000
LARGE_DB = "tasks_get_1m"
ROW_PAIRS = 16  # interleaved (1k, 1M) pairs, ABBA
ROW_WINDOW_SEC = 3.0  # short windows, alternated: machine drift over minutes cancels out

MB = 1024 * 1024


# --------------------------------------------------------------------------------------
# Wire shapes
# --------------------------------------------------------------------------------------


def meta() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": CAPS,
        "io.modelcontextprotocol/clientInfo": {"name": "tasks-get-bench", "version": "0"},
    }


def mcp_request(method: str, params: dict[str, Any], name: str) -> tuple[dict[str, str], bytes]:
    """(headers, body) of a 2026-07-28 request; `name` goes to Mcp-Name."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
        "Mcp-Name": name,
    }
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta()}}
    return headers, orjson.dumps(message)


def tasks_get(task_id: str) -> tuple[dict[str, str], bytes]:
    return mcp_request("tasks/get", {"taskId": task_id}, task_id)


# --------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}{PATH}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def base_env() -> dict[str, str]:
    drop = ("TETHER_", "FASTMCP_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(FASTMCP_LOG_LEVEL="WARNING", FASTMCP_CHECK_FOR_UPDATES="off")
    return env


def tether_env(dsn: str) -> dict[str, str]:
    env = base_env()
    env.update(
        TETHER_DATABASE_URL=dsn,
        TETHER_WORKERS=str(TETHER_WORKERS),
        TETHER_STATE_KEY=secrets.token_hex(32),
    )
    # Reach `dsn` as this process does (a test database behind a pooler: no prepared-statement
    # cache, LISTEN on a direct URL).
    route = pool.route_of(dsn)
    if route.statement_cache_size != pool.DEFAULT_STATEMENT_CACHE_SIZE:
        env["TETHER_STATEMENT_CACHE_SIZE"] = str(route.statement_cache_size)
    if route.listen_dsn is not None:
        env["TETHER_LISTEN_DATABASE_URL"] = route.listen_dsn
    return env


def spawn(name: str, command: list[str], env: dict[str, str], port: int, logs: Path) -> Server:
    log = logs / f"{name}.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, env=env, cwd=BENCH
        )
    return Server(name, proc, port, log)


def spawn_ceiling(kind: str, dsn: str, logs: Path, name: str | None = None) -> Server:
    port = free_port()
    command = [sys.executable, str(CEILINGS), kind, "--port", str(port), "--dsn", dsn]
    env = tether_env(dsn) if kind == "tether" else base_env()
    return spawn(name or kind, command, env, port, logs)


def spawn_tether_serve(dsn: str, logs: Path) -> Server:
    """`python -m tether serve` as shipped (uvicorn log level info, access log off by default)."""
    port = free_port()
    command = [sys.executable, "-m", "tether", "serve", APP_SPEC, "--port", str(port)]
    return spawn("tether-serve", command, tether_env(dsn), port, logs)


def log_tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text("utf-8", "replace").splitlines()[-lines:])
    except OSError:
        return ""


async def wait_listening(server: Server) -> None:
    """Until the port accepts connections (uvicorn listens after its lifespan started)."""
    deadline = time.monotonic() + READY_TIMEOUT_SEC
    while True:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.name} exited early:\n{log_tail(server.log)}")
        try:
            _, writer = await asyncio.open_connection(HOST, server.port)
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{server.name} not listening in {READY_TIMEOUT_SEC} s"
                ) from None
            await asyncio.sleep(0.1)
            continue
        writer.close()
        await writer.wait_closed()
        return


async def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM the processes we started; SIGKILL what is still up after STOP_GRACE_SEC."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            await asyncio.to_thread(proc.wait, STOP_GRACE_SEC)
        except subprocess.TimeoutExpired:
            proc.kill()
            await asyncio.to_thread(proc.wait, STOP_GRACE_SEC)


# --------------------------------------------------------------------------------------
# Database
# --------------------------------------------------------------------------------------


@contextlib.contextmanager
def embedded_postgres() -> Iterator[tuple[str, Path]]:
    """A fresh embedded PostgreSQL under /tmp: (dsn, pgdata); stopped and removed after."""
    data_dir = Path(tempfile.mkdtemp(prefix="tg", dir="/tmp"))
    server = embedded.start(data_dir)
    try:
        yield server.uri, data_dir / "pg"
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


@contextlib.contextmanager
def database(dsn: str | None) -> Iterator[str]:
    """`dsn` when given, else a fresh embedded PostgreSQL's for the block (`embedded_postgres`)."""
    if dsn:
        yield dsn
        return
    with embedded_postgres() as (uri, _):
        yield uri


async def migrate_db(dsn: str) -> None:
    conn = await pool.connect(dsn)
    try:
        await migrate.migrate(conn)
    finally:
        await conn.close()


def with_database(dsn: str, database: str) -> str:
    """`dsn` pointing at `database` (works for ?host=/socket URLs)."""
    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, parts.fragment))


async def create_database(dsn: str, database: str) -> str:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{database}"')
    finally:
        await conn.close()
    return with_database(dsn, database)


def postmaster_pid(pgdata: Path) -> int | None:
    try:
        return int((pgdata / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


FILL_SQL = """
INSERT INTO executions (id, workflow, business_id, status, output, root_id, last_event_id,
                        ended_at)
SELECT id, 'quick', id, 'completed', jsonb_build_object('value', g), id, 2, now()
FROM (SELECT g, 'ex_' || left(md5(g::text) || md5((-g)::text), 32) AS id
      FROM generate_series($1::bigint, $2::bigint) AS g) AS filler
"""


async def fill(dsn: str, first: int, last: int) -> float:
    """Insert filler rows numbered first..last, VACUUM ANALYZE and CHECKPOINT (so no flush of
    the fill runs during the measurements); return the seconds taken."""
    conn = await asyncpg.connect(dsn, command_timeout=FILL_TIMEOUT_SEC)
    try:
        started = time.perf_counter()
        if last >= first:
            await conn.execute(FILL_SQL, first, last)
        await conn.execute("VACUUM ANALYZE executions")
        await conn.execute("CHECKPOINT")
        return time.perf_counter() - started
    finally:
        await conn.close()


async def lookup_facts(dsn: str, execution_id: str) -> dict[str, Any]:
    """Rows, table+index size, and the buffers one primary-key lookup touches."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetchval("SELECT count(*) FROM executions")
        size = await conn.fetchval("SELECT pg_total_relation_size('executions')")
        await conn.fetchrow("SELECT * FROM executions WHERE id = $1", execution_id)
        plan = await conn.fetchval(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM executions WHERE id = $1",
            execution_id,
        )
    finally:
        await conn.close()
    node = json.loads(plan)[0]["Plan"]
    return {
        "rows": rows,
        "size_mb": size / MB,
        "node": node["Node Type"],
        "buffers": node.get("Shared Hit Blocks", 0) + node.get("Shared Read Blocks", 0),
    }


async def pg_settings(dsn: str) -> str:
    conn = await asyncpg.connect(dsn)
    try:
        version = await conn.fetchval("SHOW server_version")
        buffers = await conn.fetchval("SHOW shared_buffers")
    finally:
        await conn.close()
    return f"PostgreSQL {version} (embedded, unix socket), shared_buffers={buffers}"


# --------------------------------------------------------------------------------------
# Setting up the tasks
# --------------------------------------------------------------------------------------


async def post(
    client: httpx.AsyncClient, url: str, method: str, params: dict[str, Any], name: str
) -> Any:
    headers, body = mcp_request(method, params, name)
    resp = await client.post(url, content=body, headers=headers)
    data = resp.json()
    if resp.status_code != 200 or "result" not in data:
        raise RuntimeError(f"{method} on {url}: {resp.status_code} {resp.text[:500]}")
    return data["result"]


async def start_task(client: httpx.AsyncClient, url: str, tool: str, args: dict[str, Any]) -> str:
    created = await post(client, url, "tools/call", {"name": tool, "arguments": args}, tool)
    if created.get("resultType") != "task":
        raise RuntimeError(f"tools/call {tool} on {url} did not return a task: {created}")
    task_id: str = created["taskId"]
    return task_id


async def wait_status(
    client: httpx.AsyncClient, url: str, task_id: str, status: str, contains: str = ""
) -> dict[str, Any]:
    """Poll tasks/get (bounded) until the task has `status` and its JSON holds `contains`."""
    async with asyncio.timeout(SETUP_TIMEOUT_SEC):
        while True:
            task: dict[str, Any] = await post(
                client, url, "tasks/get", {"taskId": task_id}, task_id
            )
            if task.get("status") == status and contains in orjson.dumps(task).decode():
                return task
            await asyncio.sleep(0.05)


async def tether_tasks(url: str) -> tuple[str, str]:
    """(parked, completed) task ids on Tether."""
    async with httpx.AsyncClient(timeout=30.0) as client:
        parked = await start_task(client, url, "parked", {"label": "bench"})
        done = await start_task(client, url, "quick", {"value": 7})
        await wait_status(client, url, parked, "working", "waiting for signal")
        await wait_status(client, url, done, "completed")
    return parked, done


async def parked_runs(url: str, count: int) -> tuple[str, ...]:
    """`count` more parked runs on Tether (working tasks), for the a-run-per-lane targets."""
    async with httpx.AsyncClient(timeout=30.0) as client:
        ids = [await start_task(client, url, "parked", {"label": f"lane{i}"}) for i in range(count)]
        for task_id in ids:
            await wait_status(client, url, task_id, "working", "waiting for signal")
    return tuple(ids)


async def fastmcp_completed(url: str) -> str:
    """A new completed task on FastMCP."""
    async with httpx.AsyncClient(timeout=30.0) as client:
        done = await start_task(client, url, "quick", {"value": 7})
        await wait_status(client, url, done, "completed")
    return done


async def fastmcp_tasks(url: str) -> tuple[str, str]:
    """(working, completed) task ids on FastMCP."""
    async with httpx.AsyncClient(timeout=30.0) as client:
        working = await start_task(client, url, "sleeper", {"seconds": SLEEPER_SECONDS})
        done = await start_task(client, url, "quick", {"value": 7})
        await wait_status(client, url, working, "working")
        await wait_status(client, url, done, "completed")
    return working, done


# --------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    label: str
    server: Server
    task_id: str
    expect: str | None  # a substring every answer must hold
    lane_ids: tuple[str, ...] = ()  # one task per lane (lane i polls lane_ids[i % n])
    # A fresh task before each measurement: FastMCP purges a completed task 15 minutes after
    # it ends, sooner than a full run reaches its last measurement.
    renew: Callable[[], Awaitable[str]] | None = None

    def spec(self) -> dict[str, Any]:
        headers, body = tasks_get(self.task_id)
        lanes = [tasks_get(i) for i in self.lane_ids]
        return {
            "host": HOST,
            "port": self.server.port,
            "path": PATH,
            "headers": headers,
            "body": body.decode(),
            "expect": self.expect,
            "lanes": [(h, b.decode()) for h, b in lanes],
        }


@dataclass
class Result:
    label: str
    server: str
    phase: str
    round: int
    concurrency: int
    client: str
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    first_error: str | None
    bytes: int
    rss_start: float
    rss_end: float
    rss_max: float
    srv_cpu: float
    pg_cpu: float
    gen_cpu: float


@dataclass
class Sampler:
    """CPU and RSS of the server, PostgreSQL and the load generator during a window."""

    server_pid: int
    pg_pid: int | None
    rss: list[int] = field(default_factory=list)

    def pg_cpu(self) -> dict[int, float]:
        if self.pg_pid is None:
            return {}
        out: dict[int, float] = {}
        with contextlib.suppress(psutil.Error):
            master = psutil.Process(self.pg_pid)
            for proc in [master, *master.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    times = proc.cpu_times()
                    out[proc.pid] = times.user + times.system
        return out

    def snapshot(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pg": self.pg_cpu(), "at": time.perf_counter(), "srv": 0.0}
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(self.server_pid).cpu_times()
            out["srv"] = times.user + times.system
        return out

    def sample_rss(self) -> None:
        with contextlib.suppress(psutil.Error):
            self.rss.append(int(psutil.Process(self.server_pid).memory_info().rss))


def cpu_pct(start: dict[str, Any], end: dict[str, Any]) -> tuple[float, float]:
    """% of one core used by (server, PostgreSQL) between two snapshots."""
    seconds = max(end["at"] - start["at"], 1e-6)
    pg = sum(end["pg"][pid] - start["pg"][pid] for pid in end["pg"] if pid in start["pg"])
    return 100.0 * (end["srv"] - start["srv"]) / seconds, 100.0 * pg / seconds


async def sample_rss_until(sampler: Sampler, done: asyncio.Event) -> None:
    while not done.is_set():
        sampler.sample_rss()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), SAMPLE_EVERY_SEC)


async def check_once(target: Target) -> int:
    """One request before the load: the answer must hold `expect`; returns its size."""
    headers, body = tasks_get(target.task_id)
    async with httpx.AsyncClient(timeout=30.0) as client:
        resp = await client.post(target.server.url, content=body, headers=headers)
    if resp.status_code != 200 or (target.expect and target.expect not in resp.text):
        raise RuntimeError(f"{target.label}: unexpected answer {resp.status_code} {resp.text}")
    return len(resp.content)


@dataclass(frozen=True)
class Load:
    duration: float
    warmup: float
    pg_pid: int | None
    spec_path: Path


@dataclass(frozen=True)
class Window:
    """What the driver saw of one load generator run."""

    raw: dict[str, Any]
    rss: list[int]
    cpu: tuple[float, float]  # server, PostgreSQL


async def read_line(stream: asyncio.StreamReader, timeout: float) -> str:
    async with asyncio.timeout(timeout):
        line = await stream.readline()
    if not line:
        raise RuntimeError("the load generator ended early")
    return line.decode().strip()


async def expect_line(stream: asyncio.StreamReader, timeout: float, wanted: str) -> None:
    line = await read_line(stream, timeout)
    if line != wanted:
        raise RuntimeError(f"load generator protocol: expected {wanted!r}, got {line!r}")


async def run_loadgen(target: Target, concurrency: int, load: Load, client: str) -> Window:
    await asyncio.to_thread(load.spec_path.write_text, json.dumps(target.spec()), "utf-8")
    command = [
        sys.executable,
        str(LOADGEN),
        str(load.spec_path),
        f"--concurrency={concurrency}",
        f"--duration={load.duration}",
        f"--warmup={load.warmup}",
        f"--client={client}",
    ]
    sampler = Sampler(target.server.proc.pid, load.pg_pid)
    gen = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE)
    assert gen.stdout is not None
    done = asyncio.Event()
    limit = load.warmup + load.duration + LOADGEN_SLACK_SEC
    try:
        await expect_line(gen.stdout, limit, "window-start")
        start = sampler.snapshot()
        sampler.sample_rss()
        rss_task = asyncio.create_task(sample_rss_until(sampler, done))
        await expect_line(gen.stdout, limit, "window-end")
        end = sampler.snapshot()
        done.set()
        await rss_task
        sampler.sample_rss()
        raw = json.loads(await read_line(gen.stdout, LOADGEN_SLACK_SEC))
        await asyncio.wait_for(gen.wait(), LOADGEN_SLACK_SEC)
    finally:
        done.set()
        if gen.returncode is None:
            gen.kill()
            await gen.wait()
    return Window(raw, sampler.rss or [0], cpu_pct(start, end))


@dataclass(frozen=True)
class Run:
    """One measurement's place in the benchmark."""

    phase: str = "main"
    round: int = 0
    client: str = "raw"


async def measure(target: Target, concurrency: int, load: Load, run: Run) -> Result:
    if target.renew is not None:
        target = dataclasses.replace(target, task_id=await target.renew())
    size = await check_once(target)
    window = await run_loadgen(target, concurrency, load, run.client)
    raw, rss = window.raw, window.rss
    srv, pg = window.cpu
    result = Result(
        label=target.label,
        server=target.server.name,
        phase=run.phase,
        round=run.round,
        concurrency=concurrency,
        client=run.client,
        seconds=raw["seconds"],
        rps=raw["rps"],
        p50_ms=raw["p50_ms"],
        p99_ms=raw["p99_ms"],
        errors=raw["errors"],
        first_error=raw["first_error"],
        bytes=size,
        rss_start=rss[0] / MB,
        rss_end=rss[-1] / MB,
        rss_max=max(rss) / MB,
        srv_cpu=srv,
        pg_cpu=pg,
        gen_cpu=raw["cpu_pct"],
    )
    print(format_row(result), file=sys.stderr, flush=True)
    return result


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------

HEADER = (
    f"{'target':<18} {'conc':>4} {'rnd':>3} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} "
    f"{'err':>3} {'bytes':>5} {'RSS MB start→end (max)':>22} {'srv%':>4} {'pg%':>4} "
    f"{'gen%':>4}  phase"
)


def format_row(r: Result) -> str:
    rss = f"{r.rss_start:.1f}→{r.rss_end:.1f} ({r.rss_max:.1f})"
    phase = r.phase if r.client == "raw" else f"{r.phase}, {r.client} client"
    row = (
        f"{r.label:<18} {r.concurrency:>4} {r.round + 1:>3} {r.rps:>7.0f} {r.p50_ms:>7.2f} "
        f"{r.p99_ms:>7.2f} {r.errors:>3} {r.bytes:>5} {rss:>22} {r.srv_cpu:>4.0f} "
        f"{r.pg_cpu:>4.0f} {r.gen_cpu:>4.0f}  {phase}"
    )
    if r.first_error:
        row += f"\n    first error: {r.first_error}"
    return row


def pick(results: list[Result], label: str, concurrency: int, phase: str) -> dict[int, Result]:
    """The measurements of `label` at `concurrency` in `phase`, by round."""
    return {
        r.round: r
        for r in results
        if r.label == label and r.concurrency == concurrency and r.phase == phase
    }


def paired(
    results: list[Result],
    a: tuple[str, str],
    b: tuple[str, str],
    concurrency: int,
    attr: str = "rps",
) -> list[float]:
    """getattr(a)/getattr(b) per round, for (label, phase) pairs measured in the same round."""
    xs = pick(results, a[0], concurrency, a[1])
    ys = pick(results, b[0], concurrency, b[1])
    return [
        float(getattr(xs[k], attr)) / float(getattr(ys[k], attr))
        for k in sorted(xs)
        if k in ys and getattr(ys[k], attr)
    ]


def med(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def ratio(
    results: list[Result], a: str, b: str, concurrency: int, attr: str = "rps"
) -> float | None:
    """Median over rounds of a/b in the main phase."""
    return med(paired(results, (a, "main"), (b, "main"), concurrency, attr))


def ratio_to_fastmcp(results: list[Result], a: str, state: str, concurrency: int) -> float | None:
    """Median over rounds of a / the faster of FastMCP's two stacks in that round."""
    xs = pick(results, a, concurrency, "main")
    stacks = [pick(results, f"fastmcp {state}{s}", concurrency, "main") for s in ("", " asyncio")]
    per_round = []
    for k in sorted(xs):
        best = max((ys[k].rps for ys in stacks if k in ys), default=0.0)
        if best:
            per_round.append(xs[k].rps / best)
    return med(per_round)


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


RATIO_COLUMNS = (  # FastMCP here: its default stack (the targets use the faster of two)
    ("T-work/select", "tether working", "select + orjson", "rps"),
    ("T-done/select", "tether completed", "select + orjson", "rps"),
    ("select/fixed", "select + orjson", "fixed 500 B", "rps"),
    ("T/sel per lane", TETHER_PER_LANE, SELECT_PER_LANE, "rps"),
    ("T-work/FM-work", "tether working", "fastmcp working", "rps"),
    ("T-done/FM-done", "tether completed", "fastmcp completed", "rps"),
    ("p99 T-work/sel", "tether working", "select + orjson", "p99_ms"),
    ("p99 T-done/sel", "tether completed", "select + orjson", "p99_ms"),
)


def ratio_table(results: list[Result], concurrencies: list[int]) -> list[str]:
    lines = ["conc " + " ".join(f"{name:>15}" for name, *_ in RATIO_COLUMNS)]
    for c in concurrencies:
        cells = [fmt(ratio(results, a, b, c, attr)) for _, a, b, attr in RATIO_COLUMNS]
        lines.append(f"{c:>4} " + " ".join(f"{cell:>15}" for cell in cells))
    return lines


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "MISSED")


def check_line(name: str, value: float | None, target: str, ok: bool | None) -> str:
    shown = "n/a" if value is None else f"{value:.3f}"
    return f"  {name:<52} {shown:>7}   {target:<12} {verdict(ok)}"


def info_line(name: str, value: float | None) -> str:
    shown = "n/a" if value is None else f"{value:.3f}"
    return f"  {name:<52} {shown:>7}"


def _at_least(value: float | None, bound: float) -> bool | None:
    return None if value is None else value >= bound


def _at_most(value: float | None, bound: float) -> bool | None:
    return None if value is None else value <= bound


def target_lines(results: list[Result], million: dict[str, Any] | None) -> list[str]:
    c = TARGET_CONCURRENCY
    lines = [f"targets at concurrency {c} (median over rounds of per-round ratios):"]
    for state in ("working", "completed"):
        value = ratio(results, f"tether {state}", "select + orjson", c)
        bound = f">= {TARGET_SELECT_RATIO}"
        name = f"tether {state} / select ceiling, req/s"
        lines.append(check_line(name, value, bound, _at_least(value, TARGET_SELECT_RATIO)))
    for state, goal in (
        ("working", TARGET_FASTMCP_WORKING),
        ("completed", TARGET_FASTMCP_COMPLETED),
    ):
        value = ratio_to_fastmcp(results, f"tether {state}", state, c)
        name = f"tether {state} / fastmcp {state} (its faster stack)"
        lines.append(check_line(name, value, f">= {goal}", _at_least(value, goal)))
        for suffix, stack in (("", "uvloop+httptools"), (" asyncio", "asyncio+h11")):
            alone = ratio(results, f"tether {state}", f"fastmcp {state}{suffix}", c)
            lines.append(info_line(f"  … against fastmcp on {stack}", alone))
        reach = ratio_to_fastmcp(results, "select + orjson", state, c)
        lines.append(info_line("  … the select ceiling / fastmcp (Tether's reach)", reach))
    lines.append(
        info_line(
            "tether / select, a different run per lane, req/s",
            ratio(results, TETHER_PER_LANE, SELECT_PER_LANE, c),
        )
    )
    for state in ("working", "completed"):
        value = ratio(results, f"tether {state}", "select + orjson", c, "p99_ms")
        name = f"tether {state} p99 / select ceiling p99"
        lines.append(
            check_line(name, value, f"<= {TARGET_P99_RATIO}", _at_most(value, TARGET_P99_RATIO))
        )
    lines += rss_lines(results)
    lines += million_lines(million)
    return lines


def growth(runs: list[Result]) -> float:
    return runs[-1].rss_end - runs[0].rss_start


def rss_lines(results: list[Result]) -> list[str]:
    """Peak RSS of the Tether server under load, and its growth once the load reached its
    highest concurrency (the pool and per-connection buffers at their high-water mark); the
    select ceiling's growth over its own windows for comparison."""
    runs = [r for r in results if r.server == "tether"]
    if not runs:
        return []
    peak = max(r.rss_max for r in runs)
    top = max(r.concurrency for r in runs)
    mark = next(i for i, r in enumerate(runs) if r.concurrency == top)
    after = runs[mark:]
    served = sum(r.rps * r.seconds for r in after[1:])
    late = after[-1].rss_end - after[0].rss_end
    lines = [
        check_line(
            "tether RSS under load, max of all windows (MB)",
            peak,
            f"<= {TARGET_RSS_MB:.0f}",
            _at_most(peak, TARGET_RSS_MB),
        ),
        info_line("tether RSS growth, first window start→last end (MB)", growth(runs)),
    ]
    ceiling = [r for r in results if r.server == "select"]
    if ceiling:
        lines.append(info_line("  … select ceiling RSS growth, same (MB)", growth(ceiling)))
    lines += [
        check_line(
            f"tether RSS growth after its first c={top} window (MB)",
            late,
            f"<= {TARGET_RSS_GROWTH_MB:.0f}",
            _at_most(late, TARGET_RSS_GROWTH_MB),
        ),
        info_line(
            f"  … over {served:,.0f} requests: bytes per request",
            late * MB / served if served else None,
        ),
    ]
    return lines


def million_lines(million: dict[str, Any] | None) -> list[str]:
    if million is None:
        return []
    value = million["ratio"]
    ok = None if value is None else abs(1.0 - value) <= TARGET_ROWS_DRIFT
    each = ", ".join(f"{x:.2f}" for x in million["ratios"])
    return [
        check_line(
            "tether working req/s, 1M rows / 1k rows",
            value,
            f"1 ± {TARGET_ROWS_DRIFT:.2f}",
            ok,
        ),
        f"    … per pair: {each}",
    ]


def shipped_lines(results: list[Result]) -> list[str]:
    c = TARGET_CONCURRENCY
    value = med(paired(results, ("tether working", "as shipped"), ("tether working", "pair"), c))
    if value is None:
        return []
    return [info_line("`tether serve` as shipped / the bench server, req/s", value)]


def loadgen_lines(results: list[Result]) -> list[str]:
    rates = [
        r.rps / (r.gen_cpu / 100.0)
        for r in results
        if r.label == "fixed 500 B" and r.client == "raw" and r.gen_cpu > 0
    ]
    httpx_rows = [r for r in results if r.client == "httpx"]
    lines = []
    if rates:
        lines.append(
            f"load generator (raw): {statistics.median(rates):,.0f} req/s per core of its own "
            "CPU against the fixed server (median)"
        )
    lines.extend(
        f"load generator (httpx) at c={r.concurrency}: {r.rps:,.0f} req/s with "
        f"{r.gen_cpu:.0f}% of a core: httpx would be the bottleneck"
        for r in httpx_rows
    )
    return lines


def report(
    results: list[Result],
    concurrencies: list[int],
    context: list[str],
    million: dict[str, Any] | None,
) -> str:
    lines = [*context, *loadgen_lines(results), "", HEADER]
    lines += [format_row(r) for r in results]
    if million is not None:
        lines += ["", *million["lines"]]
    lines += ["", "ratios (median over rounds; req/s: higher is better, p99: lower is better):"]
    lines += ratio_table(results, concurrencies)
    lines += ["", *target_lines(results, million), *shipped_lines(results)]
    lines += ["", "The benchmark reports; it does not fail on a missed target."]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------


@dataclass
class Setup:
    dsn: str
    load: Load
    tmp: Path
    rounds: int
    servers: dict[str, Server] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)


@contextlib.asynccontextmanager
async def servers_up(setup: Setup, kinds: list[str]) -> AsyncIterator[None]:
    try:
        for kind in kinds:
            setup.servers[kind] = spawn_ceiling(kind, setup.dsn, setup.tmp)
        for server in setup.servers.values():
            await wait_listening(server)
        yield
    finally:
        await stop([s.proc for s in setup.servers.values()])


async def build_targets(setup: Setup, with_fastmcp: bool, lanes: int) -> None:
    s = setup.servers
    parked, done = await tether_tasks(s["tether"].url)
    many = await parked_runs(s["tether"].url, lanes)
    setup.targets = [
        Target("fixed 500 B", s["fixed"], parked, None),
        Target("select + orjson", s["select"], parked, '"status":"waiting"'),
        Target("tether working", s["tether"], parked, '"status":"working"'),
        Target("tether completed", s["tether"], done, '"status":"completed"'),
        Target(SELECT_PER_LANE, s["select"], parked, '"status":"waiting"', many),
        Target(TETHER_PER_LANE, s["tether"], parked, '"status":"working"', many),
    ]
    if with_fastmcp:
        for kind, suffix in (("fastmcp", ""), (ASYNCIO_FASTMCP, " asyncio")):
            working, finished = await fastmcp_tasks(s[kind].url)
            setup.targets += [
                Target(f"fastmcp working{suffix}", s[kind], working, '"status":"working"'),
                Target(
                    f"fastmcp completed{suffix}",
                    s[kind],
                    finished,
                    '"status":"completed"',
                    renew=functools.partial(fastmcp_completed, s[kind].url),
                ),
            ]


def target(setup: Setup, label: str) -> Target:
    return next(t for t in setup.targets if t.label == label)


async def main_rounds(setup: Setup, concurrencies: list[int]) -> list[Result]:
    """At each concurrency, `rounds` passes over every target (ceilings first)."""
    passes = itertools.product(concurrencies, range(setup.rounds), setup.targets)
    return [await measure(t, c, setup.load, Run("main", rnd)) for c, rnd, t in passes]


async def extra_rounds(setup: Setup) -> list[Result]:
    """Concurrency 16: the fixed server through httpx (once); `tether serve` as shipped,
    paired per round with the benchmark's Tether server."""
    c = TARGET_CONCURRENCY
    fixed, parked = target(setup, "fixed 500 B"), target(setup, "tether working")
    out = [await measure(fixed, c, setup.load, Run("load generator", 0, "httpx"))]
    shipped = spawn_tether_serve(setup.dsn, setup.tmp)
    try:
        await wait_listening(shipped)
        as_shipped = Target(parked.label, shipped, parked.task_id, parked.expect)
        for rnd in range(setup.rounds):
            out.append(await measure(parked, c, setup.load, Run("pair", rnd)))
            out.append(await measure(as_shipped, c, setup.load, Run("as shipped", rnd)))
    finally:
        await stop([shipped.proc])
    return out


async def million_round(setup: Setup) -> tuple[list[Result], dict[str, Any]]:
    """`tasks/get` of a parked run on the benchmark's database (1,000 filler rows added) and
    on a second database of the same cluster (1,000,000 filler rows), each served by a fresh
    Tether server of its own, measured in interleaved pairs (ABBA order) so that machine
    drift cancels out."""
    c = TARGET_CONCURRENCY
    small_dsn = setup.dsn
    small_fill = await fill(small_dsn, 1, FILL_SMALL)
    large_dsn = await create_database(setup.dsn, LARGE_DB)
    await migrate_db(large_dsn)
    large_fill = await fill(large_dsn, 1, FILL_LARGE)
    servers = {
        "rows 1k": spawn_ceiling("tether", small_dsn, setup.tmp, name="tether-1k"),
        "rows 1M": spawn_ceiling("tether", large_dsn, setup.tmp, name="tether-1M"),
    }
    results: list[Result] = []
    try:
        sides: dict[str, Target] = {}
        for phase, server in servers.items():
            await wait_listening(server)
            parked, _ = await tether_tasks(server.url)
            sides[phase] = Target("tether working", server, parked, '"status":"working"')
        for t in sides.values():  # one unrecorded load each: the fill's aftermath settles
            await measure(t, c, setup.load, Run("settle"))
        short = dataclasses.replace(setup.load, duration=min(ROW_WINDOW_SEC, setup.load.duration))
        for rnd in range(ROW_PAIRS):
            order = list(sides.items()) if rnd % 2 == 0 else list(sides.items())[::-1]
            for phase, t in order:
                results.append(await measure(t, c, short, Run(phase, rnd)))
    finally:
        await stop([s.proc for s in servers.values()])
    lines = [f"row-count independence (tether working, concurrency {c}, interleaved pairs):"]
    for (phase, t), dsn, seconds in zip(
        sides.items(), (small_dsn, large_dsn), (small_fill, large_fill), strict=True
    ):
        facts = await lookup_facts(dsn, t.task_id)
        rates = [r.rps for r in pick(results, t.label, c, phase).values()]
        lines.append(
            f"  {facts['rows']:>9,} rows ({facts['size_mb']:.0f} MB with indexes, filled in "
            f"{seconds:.1f} s): the {facts['node']} touches {facts['buffers']} buffers; "
            f"req/s {' '.join(f'{x:.0f}' for x in rates)}"
        )
    ratios = paired(results, ("tether working", "rows 1M"), ("tether working", "rows 1k"), c)
    return results, {"ratio": med(ratios), "ratios": ratios, "lines": lines}


def context_lines(args: argparse.Namespace, pg: str, load_before: tuple[float, ...]) -> list[str]:
    after = os.getloadavg()
    return [
        f"tasks/get on loopback: {args.duration:g} s per measurement after {args.warmup:g} s "
        f"warm-up, {args.rounds} round(s); load generator: its own process, one keep-alive "
        "connection per lane",
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, {pg}; uvicorn "
        f"{_version('uvicorn')} (loop/http auto), starlette {_version('starlette')}, asyncpg "
        f"{_version('asyncpg')}, fastmcp {_version('fastmcp') or 'not installed'}",
        f"load average before {load_before[0]:.1f}, after {after[0]:.1f}; Tether: "
        f"TETHER_WORKERS={TETHER_WORKERS}, pool 20; srv/pg/gen: CPU in % of one core",
    ]


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return ""


async def run(args: argparse.Namespace) -> str:
    load_before = os.getloadavg()
    with_fastmcp = not args.skip_fastmcp and importlib.util.find_spec("fastmcp_tasks") is not None
    notes = []
    if not args.skip_fastmcp and not with_fastmcp:
        notes.append("fastmcp skipped: pip install 'fastmcp[tasks]==4.1.4'")
    with embedded_postgres() as (dsn, pgdata), tempfile.TemporaryDirectory(prefix="tg_") as tmp:
        await migrate_db(dsn)
        pg = await pg_settings(dsn)
        spec = Path(tmp) / "spec.json"
        load = Load(args.duration, args.warmup, postmaster_pid(pgdata), spec)
        setup = Setup(dsn, load, Path(tmp), args.rounds)
        kinds = ["fixed", "select", "tether"]
        kinds += ["fastmcp", ASYNCIO_FASTMCP] if with_fastmcp else []
        million: dict[str, Any] | None = None
        if args.rows_only:
            results, million = await million_round(setup)
        else:
            async with servers_up(setup, kinds):
                await build_targets(setup, with_fastmcp, max(args.concurrency))
                results = await main_rounds(setup, args.concurrency)
                results += await extra_rounds(setup)
                if not args.skip_million:
                    extra, million = await million_round(setup)
                    results += extra
    context = context_lines(args, pg, load_before) + notes
    return report(results, args.concurrency, context, million)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per measurement")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds before each")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--rounds", type=int, default=1, help="passes over the targets")
    parser.add_argument("--skip-fastmcp", action="store_true")
    parser.add_argument("--skip-million", action="store_true")
    parser.add_argument("--rows-only", action="store_true", help="only the 1k/1M row pairs")
    args = parser.parse_args(argv)
    if args.rows_only and args.skip_million:
        parser.error("--rows-only and --skip-million exclude each other")
    if args.duration <= 0 or args.warmup < 0 or min(args.concurrency) < 1 or args.rounds < 1:
        parser.error("duration > 0, warmup >= 0, concurrency >= 1 and rounds >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    print(asyncio.run(run(_parse_args(argv))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
