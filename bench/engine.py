"""Tether against DBOS Transact: a 3-step workflow on one PostgreSQL, in the same run.

What is measured
----------------
For each worker count N, ``runs`` workflows of three trivial durable steps (add 1 to an
integer; the workflow returns the sum) are started and executed by N worker processes, first
on Tether, then on DBOS Transact (``bench/dbos_side.py``), against the same PostgreSQL
server. The figures of the two systems have the same definitions, on the server's clock:

* a run starts when the row that creates it is inserted (Tether ``executions.created_at``,
  DBOS ``workflow_status.created_at``) and ends when its final status is written (Tether
  ``ended_at``, DBOS ``updated_at``);
* ``seconds`` = last end - first start, ``throughput`` = runs / seconds;
* ``p50_ms`` / ``p99_ms`` are nearest-rank percentiles of end - start per run.

Starting overlaps with execution (the workers are up before the first start), so queue wait
is part of latency. The machine is shared and noisy, so the result that counts is the ratio
Tether / DBOS of throughput (and DBOS / Tether of p50 latency) at equal worker counts; the
target is a throughput ratio of at least ``TARGET_RATIO``.

Tether side (mirrors the DBOS side, see dbos_side.py's docstring for its settings)
----------------------------------------------------------------------------------
1. a fresh database ``tether_bench_<hex>`` is created, migrated, and dropped afterwards;
2. N processes ``python -m tether worker bench/engine_app.py:app`` start with
   TETHER_WORKERS=16 (runs in flight per process, as DBOS's worker_concurrency=16),
   TETHER_POOL_SIZE=20 (as DBOS's sys_db_pool_size=20) and TETHER_POLL_S=0.05 (Tether also
   wakes on NOTIFY, so polling is only the fallback); each is ready once it logs that it runs;
3. the driver (this process) starts all runs with ``Operations.start`` from 8 concurrent
   lanes over an 8-connection pool (DBOS: ``Queue.enqueue`` from 8 threads);
4. the driver polls ``executions`` until every run has ended (bounded by ``--timeout``),
   fails unless all completed, reads the timings and stops the workers.

Usage::

    python bench/engine.py [--runs 2000] [--workers 1 2] [--dsn URL] [--skip-dbos]

Without ``--dsn`` an embedded PostgreSQL (pgserver) is started under /tmp and stopped at the
end. DBOS needs ``dbos==3.4.0`` in this interpreter (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
from dbos_side import (
    _create_database,
    _drop_database,
    _percentile,
    _stop_processes,
    _with_database,
    run_dbos,
)
from engine_app import WORKFLOW_NAME

from tether.loader import load_app
from tether.runtime.operations import Operations
from tether.storage import embedded, migrate, pool

APP_SPEC = f"{Path(__file__).resolve().with_name('engine_app.py')}:app"

WORKERS_PER_PROCESS = 16
POLL_S = 0.05
POOL_SIZE = 20
ENQUEUE_LANES = 8
TARGET_RATIO = 1.5

DEFAULT_RUNS = 2000
DEFAULT_WORKERS = (1, 2)
DEFAULT_TIMEOUT_SEC = 300.0
READY_TIMEOUT_SEC = 60.0
STATUS_POLL_SEC = 0.05
READY_MARK = "workflows"  # cli.py logs "worker <id> running <n> workflows" once it runs
SERVER_SETTINGS = ("server_version", "fsync", "synchronous_commit", "shared_buffers")


# --------------------------------------------------------------------------------------
# Database lifecycle
# --------------------------------------------------------------------------------------


async def _migrate(db_url: str) -> None:
    conn = await pool.connect(db_url)
    try:
        await migrate.migrate(conn)
    finally:
        await conn.close()


# --------------------------------------------------------------------------------------
# Worker processes
# --------------------------------------------------------------------------------------


def _worker_env(db_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    env.update(
        TETHER_DATABASE_URL=db_url,
        TETHER_WORKERS=str(WORKERS_PER_PROCESS),
        TETHER_POLL_S=repr(POLL_S),
        TETHER_POOL_SIZE=str(POOL_SIZE),
    )
    return env


def _spawn_worker(db_url: str, log: Path) -> subprocess.Popen[bytes]:
    """Start one Tether worker process; its log (stderr) goes to `log`."""
    command = [sys.executable, "-m", "tether", "--log-level", "INFO", "worker", APP_SPEC]
    with log.open("wb") as sink:
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, env=_worker_env(db_url)
        )


def _log_tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text("utf-8", "replace").splitlines()[-lines:])
    except OSError:
        return ""


def _check_alive(procs: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
    for proc, log in zip(procs, logs, strict=True):
        if proc.poll() is not None:
            raise RuntimeError(
                f"Tether worker exited early with code {proc.returncode}:\n{_log_tail(log)}"
            )


async def _wait_ready(procs: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
    """Wait until every worker logged that it runs (pool, listener and claim loop are up)."""
    deadline = time.monotonic() + READY_TIMEOUT_SEC
    while not all(READY_MARK in log.read_text("utf-8", "replace") for log in logs):
        _check_alive(procs, logs)
        if time.monotonic() > deadline:
            raise TimeoutError(f"Tether workers not ready within {READY_TIMEOUT_SEC} s")
        await asyncio.sleep(0.05)


# --------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------


async def _start_runs(db_url: str, runs: int) -> float:
    """Start `runs` workflows from ENQUEUE_LANES concurrent lanes; return the seconds taken."""
    app = load_app(APP_SPEC)
    db = await pool.create_pool(db_url, min_size=ENQUEUE_LANES, max_size=ENQUEUE_LANES)
    try:
        ops = Operations(db, app)
        numbers = iter(range(runs))

        async def lane() -> None:
            for value in numbers:
                await ops.start(WORKFLOW_NAME, value)

        started = time.perf_counter()
        await asyncio.gather(*(lane() for _ in range(ENQUEUE_LANES)))
        elapsed = time.perf_counter() - started
    finally:
        await db.close()
    print(f"tether starter: {runs} started in {elapsed:.3f} s", file=sys.stderr, flush=True)
    return elapsed


async def _wait_complete(
    conn: asyncpg.Connection,
    runs: int,
    starter: asyncio.Task[float],
    procs: list[subprocess.Popen[bytes]],
    logs: list[Path],
    timeout_sec: float,
) -> None:
    """Poll `executions` until all runs ended; raise on timeout, a dead worker or starter."""
    deadline = time.monotonic() + timeout_sec
    while True:
        done = await conn.fetchval("SELECT count(*) FROM executions WHERE ended_at IS NOT NULL")
        if done >= runs:
            await starter  # surfaces a starter failure, if any
            return
        if starter.done() and starter.exception() is not None:
            await starter
        _check_alive(procs, logs)
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {done}/{runs} Tether runs ended in {timeout_sec} s")
        await asyncio.sleep(STATUS_POLL_SEC)


def _expected_output(value: str) -> str:
    """The workflow's sum for input v: (v+1) + (v+2) + (v+3); jsonb arrives as JSON text."""
    return str(3 * int(value) + 6)


def _ms(delta: Any) -> float:
    return float(delta.total_seconds() * 1000.0)


async def _collect(conn: asyncpg.Connection, runs: int, workers: int) -> dict[str, Any]:
    """Turn the per-run created_at/ended_at stamps into the benchmark result."""
    rows = await conn.fetch(
        "SELECT status, input, output, created_at, ended_at FROM executions WHERE workflow = $1",
        WORKFLOW_NAME,
    )
    failed = [r["status"] for r in rows if r["status"] != "completed"]
    wrong = [r["input"] for r in rows if r["output"] != _expected_output(r["input"])]
    if wrong:
        raise RuntimeError(f"{len(wrong)} runs returned a wrong sum, e.g. for input {wrong[0]}")
    if len(rows) != runs or failed:
        raise RuntimeError(f"expected {runs} completed runs, got {len(rows)}; bad: {failed[:5]}")
    latencies = sorted(_ms(r["ended_at"] - r["created_at"]) for r in rows)
    span_ms = _ms(max(r["ended_at"] for r in rows) - min(r["created_at"] for r in rows))
    seconds = max(span_ms, 1.0) / 1000.0
    return {
        "system": "tether",
        "workers": workers,
        "runs": runs,
        "seconds": seconds,
        "throughput": runs / seconds,
        "p50_ms": _percentile(latencies, 0.50),
        "p99_ms": _percentile(latencies, 0.99),
    }


async def _measure(db_url: str, runs: int, workers: int, timeout_sec: float) -> dict[str, Any]:
    """Start the workers, start all runs, wait for them to end and read the timings."""
    with tempfile.TemporaryDirectory(prefix="tether_bench_") as tmp:
        logs = [Path(tmp) / f"worker-{i}.log" for i in range(workers)]
        procs = [_spawn_worker(db_url, log) for log in logs]
        try:
            await _wait_ready(procs, logs)
            conn = await asyncpg.connect(db_url)
            try:
                starter = asyncio.create_task(_start_runs(db_url, runs))
                try:
                    await _wait_complete(conn, runs, starter, procs, logs, timeout_sec)
                finally:
                    starter.cancel()
                return await _collect(conn, runs, workers)
            finally:
                await conn.close()
        finally:
            await _stop_processes(procs)


async def run_tether(
    dsn: str, runs: int, workers: int, *, timeout_sec: float = DEFAULT_TIMEOUT_SEC
) -> dict[str, Any]:
    """Benchmark Tether on the server at `dsn` (needs CREATEDB); see the module docstring."""
    if runs < 1 or workers < 1:
        raise ValueError("runs and workers must be > 0")
    name = await _create_database(dsn, "tether_bench")
    try:
        db_url = _with_database(dsn, name)
        await _migrate(db_url)
        return await _measure(db_url, runs, workers, timeout_sec)
    finally:
        await _drop_database(dsn, name)


# --------------------------------------------------------------------------------------
# Driver: server, both systems, report
# --------------------------------------------------------------------------------------


@contextlib.contextmanager
def _server(dsn: str | None) -> Iterator[str]:
    """Yield `dsn`, or the URL of an embedded PostgreSQL started (and stopped) here."""
    if dsn:
        yield dsn
        return
    folder = Path(tempfile.mkdtemp(prefix="tb", dir="/tmp"))  # short: the socket lives in it
    os.chmod(folder, 0o755)  # noqa: S103 — as root, pgserver runs PostgreSQL as another user
    server = embedded.start(folder)
    try:
        yield server.uri
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


async def _server_settings(dsn: str) -> dict[str, str]:
    conn = await asyncpg.connect(dsn)
    try:
        return {s: str(await conn.fetchval(f"SHOW {s}")) for s in SERVER_SETTINGS}
    finally:
        await conn.close()


async def _benchmark(
    dsn: str, runs: int, worker_counts: list[int], skip_dbos: bool, timeout_sec: float
) -> list[dict[str, Any]]:
    """For each worker count, measure Tether and then DBOS; return every result."""
    results: list[dict[str, Any]] = []
    for workers in worker_counts:
        print(f"tether: {runs} runs, {workers} worker process(es)...", file=sys.stderr)
        results.append(await run_tether(dsn, runs, workers, timeout_sec=timeout_sec))
        if not skip_dbos:
            print(f"dbos: {runs} runs, {workers} worker process(es)...", file=sys.stderr)
            results.append(await run_dbos(dsn, runs, workers, timeout_sec=timeout_sec))
    return results


def _table(results: list[dict[str, Any]]) -> list[str]:
    lines = [f"{'system':<8} {'workers':>7} {'runs/s':>9} {'p50 ms':>9} {'p99 ms':>9} {'s':>7}"]
    lines += [
        f"{r['system']:<8} {r['workers']:>7} {r['throughput']:>9.1f} {r['p50_ms']:>9.1f} "
        f"{r['p99_ms']:>9.1f} {r['seconds']:>7.2f}"
        for r in results
    ]
    return lines


def _ratios(results: list[dict[str, Any]]) -> dict[int, tuple[float, float]]:
    """{workers: (throughput Tether/DBOS, p50 latency DBOS/Tether)} where both were measured."""
    by_key = {(r["system"], r["workers"]): r for r in results}
    out: dict[int, tuple[float, float]] = {}
    for (system, workers), tether in by_key.items():
        dbos = by_key.get(("dbos", workers))
        if system == "tether" and dbos is not None:
            p50 = dbos["p50_ms"] / max(tether["p50_ms"], 1e-9)
            out[workers] = (tether["throughput"] / dbos["throughput"], p50)
    return out


def _report(results: list[dict[str, Any]], settings: dict[str, str], runs: int) -> str:
    lines = [
        "PostgreSQL " + ", ".join(f"{k}={v}" for k, v in settings.items()),
        f"{runs} runs of a 3-step workflow per measurement; {WORKERS_PER_PROCESS} runs in "
        "flight per worker process",
        "",
        *_table(results),
        "",
    ]
    ratios = _ratios(results)
    for workers, (throughput, p50) in sorted(ratios.items()):
        lines.append(
            f"ratio Tether/DBOS, {workers} worker(s): throughput {throughput:.2f}x, "
            f"p50 latency (DBOS/Tether) {p50:.2f}x"
        )
    if ratios:
        met = all(t >= TARGET_RATIO for t, _ in ratios.values())
        verdict = "MET" if met else "NOT MET"
        lines.append(f"target throughput ratio >= {TARGET_RATIO} at equal worker counts: {verdict}")
    return "\n".join(lines)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS)
    parser.add_argument("--workers", type=int, nargs="+", default=list(DEFAULT_WORKERS))
    parser.add_argument("--dsn", help="PostgreSQL URL with CREATEDB rights (default: embedded)")
    parser.add_argument("--skip-dbos", action="store_true", help="measure Tether only")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SEC)
    return parser.parse_args(argv)


async def _main(args: argparse.Namespace) -> int:
    with _server(args.dsn) as dsn:
        settings = await _server_settings(dsn)
        results = await _benchmark(dsn, args.runs, args.workers, args.skip_dbos, args.timeout)
    print(_report(results, settings, args.runs))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    if not args.skip_dbos and importlib.util.find_spec("dbos") is None:
        print(
            "dbos is not installed in this interpreter: pip install -e '.[bench]' "
            "(or pip install dbos==3.4.0), or pass --skip-dbos",
            file=sys.stderr,
        )
        return 2
    return asyncio.run(_main(args))


if __name__ == "__main__":
    sys.exit(main())
