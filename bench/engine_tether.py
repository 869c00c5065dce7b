"""The Tether side of bench/engine.py, the mirror of dbos_side.py's `measure_dbos`.

1. the caller creates (and later drops) a fresh database; it is migrated here;
2. N processes ``python -m tether worker bench/engine_app.py:app`` run with TETHER_WORKERS=16
   (runs in flight per process, as DBOS's worker_concurrency=16), TETHER_POOL_SIZE=20 (as
   DBOS's sys_db_pool_size=20), TETHER_POLL_S=0.05 (Tether also wakes on NOTIFY, so polling
   is only the fallback) and log level WARNING (as DBOS); each is ready once it says it runs;
3. the starter, ``bench/engine_starter.py``, a process of its own (as DBOS's enqueuer),
   starts the runs: as fast as it can from 8 lanes (``throughput``; one run per statement,
   or ``batch`` runs per statement), before any worker is up (``drain``), or at a fixed rate
   (``latency``);
4. the driver polls ``executions`` until every run has ended (bounded by ``timeout_sec``),
   checks every run completed with the right sum, reads the timings and stops the processes.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
import orjson
from dbos_side import _percentile, _stop_processes
from engine_app import WORKFLOW_NAME

from tether.storage import migrate, pool

HERE = Path(__file__).resolve().parent
APP_SPEC = f"{HERE / 'engine_app.py'}:app"

WORKERS_PER_PROCESS = 16
POLL_S = 0.05
POOL_SIZE = 20
START_LANES = 8
LOG_LEVEL = "WARNING"  # the DBOS side's log level
READY_TIMEOUT_SEC = 60.0
STATUS_POLL_SEC = 0.05


async def migrate_database(db_url: str) -> None:
    conn = await pool.connect(db_url)
    try:
        await migrate.migrate(conn)
    finally:
        await conn.close()


def _env(db_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    env.update(
        TETHER_DATABASE_URL=db_url,
        TETHER_WORKERS=str(WORKERS_PER_PROCESS),
        TETHER_POLL_S=repr(POLL_S),
        TETHER_POOL_SIZE=str(POOL_SIZE),
    )
    return env


def _spawn_worker(db_url: str, log: Path) -> subprocess.Popen[bytes]:
    """One Tether worker process; it prints one line on stdout once it runs."""
    command = [
        sys.executable, "-m", "tether", "--log-level", LOG_LEVEL, "worker", APP_SPEC
    ]  # fmt: skip
    with log.open("wb") as sink:
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, env=_env(db_url)
        )


def _spawn_starter(db_url: str, runs: int, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    command = [
        sys.executable, str(HERE / "engine_starter.py"), "--db-url", db_url, "--runs", str(runs),
        "--lanes", str(START_LANES), *extra,
    ]  # fmt: skip
    with out.open("wb") as sink:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=sink, env=_env(db_url))


def _tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text("utf-8", "replace").splitlines()[-lines:])
    except OSError:
        return ""


def _check_alive(procs: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
    for proc, log in zip(procs, logs, strict=True):
        if proc.poll() is not None and proc.returncode != 0:
            raise RuntimeError(f"a Tether process exited with {proc.returncode}:\n{_tail(log)}")


async def _wait_ready(
    conn: asyncpg.Connection, procs: list[subprocess.Popen[bytes]], logs: list[Path]
) -> int:
    """Until every worker listens for wake-ups (at log level WARNING a worker says nothing
    when it is up: its LISTEN connection is the sign), then a moment for its claim loop.
    Returns how many polls it took (one transaction each)."""
    deadline = time.monotonic() + READY_TIMEOUT_SEC
    query = (
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND query ILIKE 'LISTEN%'"
    )
    polls = 1
    while await conn.fetchval(query) < len(procs):
        polls += 1
        _check_alive(procs, logs)
        if time.monotonic() > deadline:
            raise TimeoutError(f"Tether workers not ready within {READY_TIMEOUT_SEC} s")
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    return polls


async def _wait_complete(
    conn: asyncpg.Connection,
    runs: int,
    procs: list[subprocess.Popen[bytes]],
    logs: list[Path],
    timeout_sec: float,
) -> int:
    """Poll `executions` until all runs ended; the number of polls (one transaction each)."""
    deadline = time.monotonic() + timeout_sec
    polls = 0
    while True:
        polls += 1
        done = await conn.fetchval("SELECT count(*) FROM executions WHERE ended_at IS NOT NULL")
        if done >= runs:
            return polls
        _check_alive(procs, logs)
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {done}/{runs} Tether runs ended in {timeout_sec} s")
        await asyncio.sleep(STATUS_POLL_SEC)


def _ms(delta: Any) -> float:
    return float(delta.total_seconds() * 1000.0)


async def _collect(conn: asyncpg.Connection, runs: int, workers: int) -> dict[str, Any]:
    """Check every run completed with the right sum; the timings (see engine.py)."""
    rows = await conn.fetch(
        "SELECT status, input, output, created_at, ended_at FROM executions WHERE workflow = $1",
        WORKFLOW_NAME,
    )
    failed = [r["status"] for r in rows if r["status"] != "completed"]
    if len(rows) != runs or failed:
        raise RuntimeError(f"expected {runs} completed runs, got {len(rows)}; bad: {failed[:5]}")
    # jsonb arrives as JSON text: the sum of (v+1) + (v+2) + (v+3)
    wrong = [
        r["input"] for r in rows if orjson.loads(r["output"]) != 3 * orjson.loads(r["input"]) + 6
    ]
    if wrong:
        raise RuntimeError(f"{len(wrong)} Tether runs returned a wrong sum, e.g. for {wrong[0]}")
    latencies = sorted(_ms(r["ended_at"] - r["created_at"]) for r in rows)
    ends = sorted(r["ended_at"] for r in rows)
    seconds = max(_ms(ends[-1] - min(r["created_at"] for r in rows)), 1.0) / 1000.0
    return {
        "system": "tether",
        "workers": workers,
        "runs": runs,
        "seconds": seconds,
        "throughput": runs / seconds,
        "p50_ms": _percentile(latencies, 0.50),
        "p99_ms": _percentile(latencies, 0.99),
        "drain_seconds": max(_ms(ends[-1] - ends[0]), 1.0) / 1000.0,
    }


async def measure_tether(
    db_url: str,
    runs: int,
    workers: int,
    mode: str = "throughput",
    *,
    rate: float = 200.0,
    batch: int = 1,
    timeout_sec: float = 300.0,
) -> dict[str, Any]:
    """One measurement on the fresh database at `db_url` (modes as `measure_dbos`)."""
    await migrate_database(db_url)
    with tempfile.TemporaryDirectory(prefix="tether_bench_") as tmp:
        logs = [Path(tmp) / f"worker-{i}.log" for i in range(workers)]
        out = Path(tmp) / "starter.json"
        extra = ["--rate", repr(rate)] if mode == "latency" else ["--batch", str(batch)]
        procs: list[subprocess.Popen[bytes]] = []
        files: list[Path] = []  # each process's output, for its error message
        conn = await asyncpg.connect(db_url)
        try:
            if mode == "drain":
                starter = _spawn_starter(db_url, runs, out, *extra)
                procs.append(starter)
                files.append(out)
                if await asyncio.to_thread(starter.wait, timeout_sec) != 0:
                    raise RuntimeError(f"Tether starter failed with code {starter.returncode}")
            started = [_spawn_worker(db_url, log) for log in logs]
            procs += started
            files += logs
            polls = await _wait_ready(conn, started, logs)
            if mode != "drain":
                starter = _spawn_starter(db_url, runs, out, *extra)
                procs.append(starter)
                files.append(out)
            polls += await _wait_complete(conn, runs, procs, files, timeout_sec)
            result = await _collect(conn, runs, workers)
            if await asyncio.to_thread(starter.wait, timeout_sec) != 0:
                raise RuntimeError(f"Tether starter failed with code {starter.returncode}")
            result["starter"] = orjson.loads(out.read_bytes())
            result["driver_xacts"] = polls + 2
            return result
        finally:
            await conn.close()
            await _stop_processes(procs)
