"""DBOS Transact half of the Tether benchmark: a 3-step workflow run through a DBOS queue.

What is measured
----------------
``runs`` workflows, each three trivial ``@DBOS.step()`` calls (add 1 to an integer) whose
results the workflow sums, are enqueued onto one DBOS queue and executed by ``workers``
separate OS processes, each a DBOS executor listening to that queue. This is the DBOS
counterpart of N worker processes of a queue-based engine.

Timing is read from DBOS's own system table ``dbos.workflow_status``, so every figure is
on one clock (the PostgreSQL server's):

* a run starts at ``created_at``: DBOS fills it with ``now()`` in the transaction that
  inserts the ENQUEUED row, i.e. when the workflow was enqueued;
* a run ends at ``updated_at``: DBOS sets it (and ``completed_at``) to ``now()`` in the
  transaction that writes the final SUCCESS status and output;
* ``seconds`` spans the first enqueue to the last completion
  (``max(updated_at) - min(created_at)``) and ``throughput`` is ``runs / seconds``;
* ``p50_ms`` / ``p99_ms`` are percentiles of ``updated_at - created_at`` per run.

Both columns have millisecond resolution. Enqueueing overlaps with execution: the workers
are already polling when the first workflow is enqueued, so queue wait is part of latency.

Process layout (all started with ``subprocess`` so the caller's process never hosts a DBOS
singleton, threads or logging configuration):

1. the caller creates a fresh database ``dbos_bench_<hex>`` (asyncpg) and drops it after;
2. worker 0 starts, runs DBOS's system-database migrations and registers the queue, then
   workers 1..N-1 start (without migrating, to avoid concurrent DDL); each worker reports
   ready once its queue-polling thread for the benchmark queue is running;
3. an enqueuer process (a DBOS executor that listens to no queue) enqueues all runs with
   ``Queue.enqueue`` from ``ENQUEUE_THREADS`` threads;
4. the caller polls ``dbos.workflow_status`` until all runs are terminal (``timeout_sec``),
   then terminates the workers.

Settings (chosen to be the equivalent of the tuning given to the other engine; the first
two are keyword arguments of :func:`run_dbos` and CLI flags):

* queue ``worker_concurrency=16``: at most 16 workflows running per worker process;
  no global concurrency limit and no rate limiter, so dequeueing uses SKIP LOCKED;
* queue ``polling_interval_sec=0.01``: DBOS only requires it to be positive; 10 ms keeps
  dequeue latency low without a busy loop against the database (each poll is a few
  queries, since DBOS re-reads the database-backed queue configuration every poll);
* the queue is registered by the workers (DBOS stores queue settings in the system
  database); the enqueuer only retrieves it, so it cannot overwrite them;
* ``sys_db_pool_size=20`` (the DBOS default) per process;
* ``application_version`` pinned to one value so every process dequeues every run;
* ``log_level=WARNING`` so console logging is not part of the measurement.

Usage::

    python bench/dbos_side.py --dsn postgresql://user:pw@host/db --runs 200 --workers 1

Requires ``dbos==3.4.0`` and ``asyncpg`` (tested with ``asyncpg==0.32.0``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import pickle
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

APP_NAME = "tether_bench"
APP_VERSION = "bench"
QUEUE_NAME = "bench_queue"
WORKFLOW_NAME = "bench_three_steps"
STEP_NAME = "bench_add_one"

WORKER_CONCURRENCY = 16
QUEUE_POLLING_INTERVAL_SEC = 0.01
SYS_DB_POOL_SIZE = 20
ENQUEUE_THREADS = 8

DEFAULT_TIMEOUT_SEC = 300.0
READY_TIMEOUT_SEC = 60.0
STATUS_POLL_SEC = 0.05
TERMINAL_STATUSES = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")


# --------------------------------------------------------------------------------------
# Code that runs inside the DBOS subprocesses (dbos is imported only there).
# --------------------------------------------------------------------------------------

_workflow: Callable[[int], int] | None = None


def _define_workflow() -> Callable[[int], int]:
    """Register the benchmark workflow with DBOS, once per process.

    Done lazily so that importing this module (e.g. from the benchmark driver) neither
    needs ``dbos`` nor touches DBOS's global registry. Explicit names keep the workflow
    identity independent of whether the module runs as ``__main__`` or is imported.
    """
    global _workflow
    if _workflow is not None:
        return _workflow
    from dbos import DBOS

    @DBOS.step(name=STEP_NAME)
    def add_one(value: int) -> int:
        return value + 1

    @DBOS.workflow(name=WORKFLOW_NAME)
    def three_steps(value: int) -> int:
        first = add_one(value)
        second = add_one(first)
        third = add_one(second)
        return first + second + third

    _workflow = three_steps
    return three_steps


def _dbos_config(db_url: str, executor_id: str, run_migrations: bool) -> dict[str, Any]:
    """DBOS configuration shared by workers and the enqueuer; see module docstring."""
    return {
        "name": APP_NAME,
        "system_database_url": db_url,
        "application_version": APP_VERSION,
        "executor_id": executor_id,
        "sys_db_pool_size": SYS_DB_POOL_SIZE,
        "log_level": "WARNING",
        "run_migrations": run_migrations,
    }


def _launch_dbos(db_url: str, executor_id: str, run_migrations: bool, queues: list[str]) -> None:
    """Create and launch the DBOS singleton of this process, listening only to ``queues``."""
    from dbos import DBOS

    _define_workflow()
    DBOS(config=_dbos_config(db_url, executor_id, run_migrations))  # type: ignore[arg-type]
    DBOS.listen_queues(queues)
    DBOS.launch()


def _wait_for_queue_thread(timeout_sec: float) -> None:
    """Block until DBOS's polling thread for the benchmark queue is running.

    DBOS discovers queues from the database about once a second, so a worker that just
    registered the queue may not be polling it yet; readiness must mean "polling".
    """
    deadline = time.monotonic() + timeout_sec
    wanted = f"queue-worker-{QUEUE_NAME}"
    while time.monotonic() < deadline:
        if any(t.name == wanted for t in threading.enumerate()):
            return
        time.sleep(0.02)
    raise TimeoutError(f"DBOS queue thread {wanted!r} did not start within {timeout_sec} s")


def _worker_main(
    db_url: str, index: int, ready_file: Path, concurrency: int, polling_sec: float
) -> None:
    """Run one DBOS executor that executes workflows from the benchmark queue until killed.

    DBOS keeps queue settings in the system database; every worker registers the same
    values, so whichever upsert lands last, the configuration is the same.
    """
    from dbos import DBOS

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    _launch_dbos(db_url, f"worker-{index}", run_migrations=index == 0, queues=[QUEUE_NAME])
    DBOS.register_queue(
        QUEUE_NAME,
        worker_concurrency=concurrency,
        polling_interval_sec=polling_sec,
        on_conflict="always_update",
    )
    _wait_for_queue_thread(READY_TIMEOUT_SEC)
    ready_file.write_text("ready")
    stop.wait()
    os._exit(0)  # DBOS.destroy() would wait on in-flight work; the database is dropped anyway.


def _enqueuer_main(
    db_url: str, runs: int, threads: int, register: bool, rate: float, result_file: Path | None
) -> None:
    """Enqueue ``runs`` workflows; this process executes none of them.

    As fast as it can from ``threads`` threads (writes ``{"seconds"}``), or with ``rate`` on an
    open-loop schedule (enqueue i is due at i / rate s; writes ``{"latencies_ms"}``, each from
    when it was due to when it returned). With ``register`` (the drain, no worker is up yet) it
    migrates and registers the queue itself, with the workers' settings."""
    from dbos import DBOS

    _launch_dbos(db_url, "enqueuer", run_migrations=register, queues=[])
    if register:
        DBOS.register_queue(
            QUEUE_NAME,
            worker_concurrency=WORKER_CONCURRENCY,
            polling_interval_sec=QUEUE_POLLING_INTERVAL_SEC,
            on_conflict="always_update",
        )
    queue = DBOS.retrieve_queue(QUEUE_NAME)  # registered by the workers; never re-register
    if queue is None:
        raise RuntimeError(f"queue {QUEUE_NAME!r} was not registered by the workers")
    workflow = _define_workflow()
    result: dict[str, Any]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        if rate:
            result = {"latencies_ms": _enqueue_at_rate(pool, queue, workflow, runs, rate)}
        else:
            list(pool.map(lambda i: queue.enqueue(workflow, i).get_workflow_id(), range(runs)))
            result = {"seconds": time.perf_counter() - started}
    print(
        f"dbos enqueuer: {runs} enqueued in {time.perf_counter() - started:.3f} s",
        file=sys.stderr,
        flush=True,
    )
    if result_file is not None:
        result_file.write_text(json.dumps(result))
    os._exit(0)


def _enqueue_at_rate(
    pool: ThreadPoolExecutor, queue: Any, workflow: Callable[[int], int], runs: int, rate: float
) -> list[float]:
    origin = time.perf_counter()

    def one(value: int, due: float) -> float:
        queue.enqueue(workflow, value).get_workflow_id()
        return (time.perf_counter() - due) * 1000.0

    futures = []
    for value in range(runs):
        due = origin + value / rate
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        futures.append(pool.submit(one, value, due))
    return [f.result() for f in futures]


# --------------------------------------------------------------------------------------
# Driver side: database lifecycle, process orchestration, measurement.
# --------------------------------------------------------------------------------------


def _with_database(dsn: str, database: str) -> str:
    """Return ``dsn`` pointing at ``database`` (works for TCP and ``?host=/socket`` URLs)."""
    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, parts.fragment))


async def _create_database(dsn: str, prefix: str = "dbos_bench") -> str:
    """Create a fresh, uniquely named database so measurements never share state."""
    name = f"{prefix}_{secrets.token_hex(6)}"
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return name


async def _drop_database(dsn: str, name: str) -> None:
    """Drop the benchmark database, disconnecting any straggling sessions first."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = $1 AND pid <> pg_backend_pid()",
            name,
        )
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
    finally:
        await conn.close()


def _spawn(role: str, *args: str) -> subprocess.Popen[bytes]:
    """Start this file as a fresh Python process in the given role."""
    command = [sys.executable, str(Path(__file__).resolve()), "--role", role, *args]
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


async def _wait_ready(procs: list[subprocess.Popen[bytes]], files: list[Path]) -> None:
    """Wait until every worker wrote its ready file; fail fast if one exits."""
    deadline = time.monotonic() + READY_TIMEOUT_SEC
    while not all(f.exists() for f in files):
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"DBOS worker exited early with code {proc.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"DBOS workers not ready within {READY_TIMEOUT_SEC} s")
        await asyncio.sleep(0.05)


async def _start_workers(
    db_url: str, workers: int, tmp: Path, settings: list[str], *, together: bool = False
) -> list[subprocess.Popen[bytes]]:
    """Start worker 0 (migrates, registers the queue), then the rest concurrently; all at
    once with `together` (the schema and queue already exist: the drain)."""
    procs: list[subprocess.Popen[bytes]] = []
    batches = [list(range(workers))] if together else [[0], list(range(1, workers))]
    try:
        for batch in batches:
            files = [tmp / f"worker-{i}.ready" for i in batch]
            started = [
                _spawn(
                    "worker",
                    "--db-url",
                    db_url,
                    "--index",
                    str(i),
                    "--ready-file",
                    str(f),
                    *settings,
                )
                for i, f in zip(batch, files, strict=True)
            ]
            procs.extend(started)
            await _wait_ready(started, files)
    except BaseException:
        await _stop_processes(procs)
        raise
    return procs


async def _stop_processes(procs: list[subprocess.Popen[bytes]]) -> None:
    """Terminate the processes we started, escalating to SIGKILL after 10 s."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            await asyncio.to_thread(proc.wait, 10)
        except subprocess.TimeoutExpired:
            proc.kill()
            await asyncio.to_thread(proc.wait)


async def _wait_complete(
    conn: asyncpg.Connection, runs: int, enqueuer: subprocess.Popen[bytes], timeout_sec: float
) -> int:
    """Poll DBOS's status table until all runs are terminal; raise on timeout or failure.
    Returns how many polls it took (each one a transaction on the database)."""
    deadline = time.monotonic() + timeout_sec
    query = "SELECT count(*) FROM dbos.workflow_status WHERE name = $1 AND status = ANY($2::text[])"
    polls = 0
    while True:
        polls += 1
        done = await conn.fetchval(query, WORKFLOW_NAME, list(TERMINAL_STATUSES))
        if done >= runs:
            return polls
        code = enqueuer.poll()
        if code not in (None, 0):
            raise RuntimeError(f"DBOS enqueuer failed with exit code {code}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {done}/{runs} DBOS workflows finished in {timeout_sec} s")
        await asyncio.sleep(STATUS_POLL_SEC)


def _percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, min(len(sorted_values), round(fraction * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


async def _collect(conn: asyncpg.Connection, runs: int, workers: int) -> dict[str, Any]:
    """Turn the per-run created_at/updated_at stamps into the benchmark result."""
    rows = await conn.fetch(
        "SELECT s.status, coalesce(i.inputs, s.inputs) AS inputs, "
        "coalesce(o.output, s.output) AS output, s.created_at, s.updated_at "
        "FROM dbos.workflow_status s "
        "LEFT JOIN dbos.workflow_input i USING (workflow_uuid) "
        "LEFT JOIN dbos.workflow_output o USING (workflow_uuid) WHERE s.name = $1",
        WORKFLOW_NAME,
    )
    failed = [r["status"] for r in rows if r["status"] != "SUCCESS"]
    if len(rows) != runs or failed:
        raise RuntimeError(f"expected {runs} successful runs, got {len(rows)}; bad: {failed[:5]}")
    wrong = [r["inputs"] for r in rows if not _output_right(r["inputs"], r["output"])]
    if wrong:
        raise RuntimeError(f"{len(wrong)} DBOS runs returned a wrong sum")
    ends = sorted(r["updated_at"] for r in rows)
    latencies = sorted(float(r["updated_at"] - r["created_at"]) for r in rows)
    span_ms = max(r["updated_at"] for r in rows) - min(r["created_at"] for r in rows)
    seconds = max(span_ms, 1) / 1000.0
    return {
        "system": "dbos",
        "workers": workers,
        "runs": runs,
        "seconds": seconds,
        "throughput": runs / seconds,
        "p50_ms": _percentile(latencies, 0.50),
        "p99_ms": _percentile(latencies, 0.99),
        "drain_seconds": max(ends[-1] - ends[0], 1) / 1000.0,
    }


def _output_right(inputs: str, output: str) -> bool:
    """DBOS 3.4 stores inputs ({"args", "kwargs"}, in workflow_input) and output (in
    workflow_output) as base64 pickles (its default serializer): the output must be the
    workflow's sum (v+1) + (v+2) + (v+3)."""
    args = pickle.loads(base64.b64decode(inputs))  # noqa: S301 — our own benchmark's rows
    value = args["args"][0] if isinstance(args, dict) else args[0][0]
    return bool(pickle.loads(base64.b64decode(output)) == 3 * value + 6)  # noqa: S301


async def measure_dbos(
    db_url: str,
    runs: int,
    workers: int,
    mode: str = "throughput",
    *,
    rate: float = 200.0,
    timeout_sec: float = DEFAULT_TIMEOUT_SEC,
    settings: list[str] | None = None,
) -> dict[str, Any]:
    """One measurement on the (fresh, existing) database at ``db_url``.

    ``throughput``: workers up, then the enqueuer enqueues ``runs`` as fast as it can.
    ``drain``: the enqueuer queues ``runs`` with no worker up, then all workers start at once.
    ``latency``: workers up, then the enqueuer enqueues ``runs`` at ``rate`` per second.
    The result has the timings of `_collect`, what the enqueuer measured (``starter``) and
    ``driver_xacts``, the transactions this driver ran on the database."""
    with tempfile.TemporaryDirectory(prefix="dbos_bench_") as tmp:
        result_file = Path(tmp) / "enqueuer.json"
        enqueue = ["--db-url", db_url, "--runs", str(runs), "--threads", str(ENQUEUE_THREADS)]
        enqueue += ["--result-file", str(result_file)]
        procs: list[subprocess.Popen[bytes]] = []
        try:
            if mode == "drain":
                enqueuer = _spawn("enqueuer", *enqueue, "--register")
                procs.append(enqueuer)
                if await asyncio.to_thread(enqueuer.wait, timeout_sec) != 0:
                    raise RuntimeError(f"DBOS enqueuer failed with code {enqueuer.returncode}")
            procs += await _start_workers(
                db_url, workers, Path(tmp), settings or [], together=mode == "drain"
            )
            if mode != "drain":
                extra = ["--rate", repr(rate)] if mode == "latency" else []
                enqueuer = _spawn("enqueuer", *enqueue, *extra)
                procs.append(enqueuer)
            conn = await asyncpg.connect(db_url)
            try:
                polls = await _wait_complete(conn, runs, enqueuer, timeout_sec)
                result = await _collect(conn, runs, workers)
            finally:
                await conn.close()
            if await asyncio.to_thread(enqueuer.wait, timeout_sec) != 0:
                raise RuntimeError(f"DBOS enqueuer failed with code {enqueuer.returncode}")
            result["starter"] = json.loads(result_file.read_text())
            result["driver_xacts"] = polls + 1
            return result
        finally:
            await _stop_processes(procs)


async def run_dbos(
    dsn: str,
    runs: int,
    workers: int,
    *,
    timeout_sec: float = DEFAULT_TIMEOUT_SEC,
    worker_concurrency: int = WORKER_CONCURRENCY,
    polling_interval_sec: float = QUEUE_POLLING_INTERVAL_SEC,
) -> dict[str, Any]:
    """Benchmark DBOS on the server at ``dsn``; see the module docstring for the method.

    ``dsn`` must name a database the role can connect to and have CREATEDB rights; a fresh
    ``dbos_bench_<hex>`` database is created next to it and dropped afterwards.
    """
    if runs < 1 or workers < 1 or worker_concurrency < 1 or polling_interval_sec <= 0:
        raise ValueError("runs, workers, worker_concurrency and polling interval must be > 0")
    settings = [
        "--worker-concurrency",
        str(worker_concurrency),
        "--polling-interval",
        repr(polling_interval_sec),
    ]
    name = await _create_database(dsn)
    try:
        db_url = _with_database(dsn, name)
        return await measure_dbos(db_url, runs, workers, timeout_sec=timeout_sec, settings=settings)
    finally:
        await _drop_database(dsn, name)


def run_dbos_sync(dsn: str, runs: int, workers: int, **options: Any) -> dict[str, Any]:
    """Blocking wrapper of :func:`run_dbos` for callers without an event loop."""
    return asyncio.run(run_dbos(dsn, runs, workers, **options))


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="PostgreSQL URL of a database with CREATEDB rights")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SEC)
    parser.add_argument("--worker-concurrency", type=int, default=WORKER_CONCURRENCY)
    parser.add_argument("--polling-interval", type=float, default=QUEUE_POLLING_INTERVAL_SEC)
    # Internal: how the driver starts its DBOS subprocesses.
    parser.add_argument("--role", choices=["driver", "worker", "enqueuer"], default="driver")
    parser.add_argument("--db-url", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=ENQUEUE_THREADS, help=argparse.SUPPRESS)
    parser.add_argument("--ready-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--register", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rate", type=float, default=0.0, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    if args.role == "worker":
        _worker_main(
            args.db_url,
            args.index,
            args.ready_file,
            args.worker_concurrency,
            args.polling_interval,
        )
    elif args.role == "enqueuer":
        _enqueuer_main(
            args.db_url, args.runs, args.threads, args.register, args.rate, args.result_file
        )
    else:
        if not args.dsn:
            raise SystemExit("--dsn is required")
        result = asyncio.run(
            run_dbos(
                args.dsn,
                args.runs,
                args.workers,
                timeout_sec=args.timeout,
                worker_concurrency=args.worker_concurrency,
                polling_interval_sec=args.polling_interval,
            )
        )
        print(json.dumps(result))


if __name__ == "__main__":
    main()
