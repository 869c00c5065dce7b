"""Tether against DBOS Transact: a 3-step workflow on one PostgreSQL, against the server's
commit ceiling measured in the same run.

What is measured
----------------
The workflow is the same on both systems: three durable steps each add 1 to an integer and
the workflow returns their sum (``engine_app.py``, ``dbos_side.py``). Every measurement gets a
fresh database, dropped afterwards. Both systems' workers log at WARNING, their runs are
started by a process of their own (``engine_starter.py``, DBOS's enqueuer), and every run's
output is checked on both sides (a run that did not complete or returned a wrong sum fails
the measurement). For each worker count the two systems alternate which goes first.

* **ceiling**: 16 connections of single-row INSERT commits on a fresh table (``engine_ceiling.py``),
  at the start and at the end of the benchmark; the figure used is their mean.
* **throughput**: N worker processes up, then ``--runs`` runs started as fast as the starter
  can (8 lanes; Tether one run per statement with ``--tether-batch 1``, else that many runs
  per ``start_many`` statement). On the server's clock: a run starts when its row is inserted
  and ends when its final status is written; runs/s = runs / (last end - first start); p50 /
  p99 are nearest-rank percentiles of end - start.
* **commits per run**: ``pg_stat_database.xact_commit`` of the measurement's database, from
  before the processes start to after they have all exited, minus the driver's own polls,
  divided by the runs. It counts every transaction (read-only ones too), with the starter's,
  the workers' idle polling and DBOS's migrations.
* **fraction of the ceiling**: runs/s / (ceiling / commits per run): how close a system comes
  to what the server could commit for the commits it spends per run.
* **drain**: ``--drain-runs`` runs queued before any worker is up, then N workers start; runs/s
  = (runs - 1) / (last end - first end), so process start-up is not counted.
* **start latency**: one worker process up, ``--latency-starts`` single starts (enqueues) at
  ``--rate`` per second on an open-loop schedule, each timed from when it was due to when it
  returned (committed).

Usage::

    python bench/engine.py                      # the short default: about 4 minutes
    python bench/engine.py --runs 10000 --drain-runs 10000 --latency-starts 4000   # full
    python bench/engine.py --skip-dbos --dsn postgresql://user:pw@host/db

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
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import orjson
from dbos_side import _create_database, _drop_database, _percentile, _with_database, measure_dbos
from engine_ceiling import commit_ceiling, commits
from engine_tether import WORKERS_PER_PROCESS, measure_tether

from tether.storage import embedded

TARGET_RUNS_S = 2000.0
TARGET_FRACTION = 0.5
TARGET_RATIO = 5.0
TARGET_START_P99_MS = 20.0
STATS_SETTLE_SEC = 1.0
SERVER_SETTINGS = ("server_version", "fsync", "synchronous_commit", "shared_buffers")

Measure = Callable[..., Awaitable[dict[str, Any]]]


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


async def _one(
    dsn: str, system: str, mode: str, runs: int, workers: int, args: argparse.Namespace
) -> dict[str, Any]:
    """One measurement of `system` in a fresh database, with its commits per run."""
    print(
        f"{system} {mode}: {runs} runs, {workers} worker process(es)...",
        file=sys.stderr,
        flush=True,
    )
    name = await _create_database(dsn, f"{system}_bench")
    try:
        db_url = _with_database(dsn, name)
        before = await commits(dsn, name)
        if system == "tether":
            result = await measure_tether(
                db_url,
                runs,
                workers,
                mode,
                rate=args.rate,
                batch=args.tether_batch,
                timeout_sec=args.timeout,
            )
        else:
            result = await measure_dbos(
                db_url, runs, workers, mode, rate=args.rate, timeout_sec=args.timeout
            )
        await asyncio.sleep(STATS_SETTLE_SEC)  # the exited backends' last counts land
        spent = await commits(dsn, name) - before - result["driver_xacts"]
    finally:
        await _drop_database(dsn, name)
    result.update(mode=mode, commits_per_run=spent / runs)
    return result


def _systems(i: int, skip_dbos: bool) -> list[str]:
    """Which system goes first alternates with `i`."""
    if skip_dbos:
        return ["tether"]
    return ["tether", "dbos"] if i % 2 == 0 else ["dbos", "tether"]


def _plan(args: argparse.Namespace) -> list[tuple[str, str, int, int]]:
    """(system, mode, runs, workers) of every measurement, in order."""
    plan = []
    for i, workers in enumerate(args.workers if args.runs else []):
        plan += [(s, "throughput", args.runs, workers) for s in _systems(i, args.skip_dbos)]
    if args.drain_runs:
        for i, workers in enumerate(args.workers):
            plan += [
                (s, "drain", args.drain_runs, workers) for s in _systems(i + 1, args.skip_dbos)
            ]
    if args.latency_starts:
        plan += [(s, "latency", args.latency_starts, 1) for s in _systems(0, args.skip_dbos)]
    return plan


async def _benchmark(dsn: str, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"ceiling": [await commit_ceiling(dsn, args.ceiling_seconds)]}
    results: list[dict[str, Any]] = []
    for system, mode, runs, workers in _plan(args):
        result = await _one(dsn, system, mode, runs, workers, args)
        results.append(result)
    out["ceiling"].append(await commit_ceiling(dsn, args.ceiling_seconds))
    out["results"] = results
    return out


def _throughput_lines(results: list[dict[str, Any]], ceiling: float) -> list[str]:
    lines = [
        f"{'system':<7} {'workers':>7} {'runs/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'s':>6} "
        f"{'commits/run':>11} {'ceiling/cpr':>11} {'fraction':>8}"
    ]
    for r in results:
        derived = ceiling / max(r["commits_per_run"], 1e-9)
        r["fraction"] = r["throughput"] / derived
        lines.append(
            f"{r['system']:<7} {r['workers']:>7} {r['throughput']:>8.1f} {r['p50_ms']:>8.1f} "
            f"{r['p99_ms']:>8.1f} {r['seconds']:>6.2f} {r['commits_per_run']:>11.2f} "
            f"{derived:>11.0f} {r['fraction']:>8.2f}"
        )
    return lines


def _drain_lines(results: list[dict[str, Any]]) -> list[str]:
    lines = [f"{'system':<7} {'workers':>7} {'runs':>6} {'runs/s':>8} {'s':>6} {'commits/run':>11}"]
    for r in results:
        r["drain_rate"] = (r["runs"] - 1) / r["drain_seconds"]
        lines.append(
            f"{r['system']:<7} {r['workers']:>7} {r['runs']:>6} {r['drain_rate']:>8.1f} "
            f"{r['drain_seconds']:>6.2f} {r['commits_per_run']:>11.2f}"
        )
    return lines


def _latency_lines(results: list[dict[str, Any]], rate: float) -> list[str]:
    lines = [f"{'system':<7} {'starts':>6} {'per s':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"]
    for r in results:
        latencies = sorted(r["starter"]["latencies_ms"])
        r["start_p50_ms"], r["start_p99_ms"] = (
            _percentile(latencies, 0.5),
            _percentile(latencies, 0.99),
        )
        lines.append(
            f"{r['system']:<7} {r['runs']:>6} {rate:>6.0f} {r['start_p50_ms']:>8.2f} "
            f"{r['start_p99_ms']:>8.2f} {latencies[-1]:>8.2f}"
        )
    return lines


def _verdicts(results: list[dict[str, Any]]) -> list[str]:
    by = {(r["mode"], r["system"], r["workers"]): r for r in results}
    lines = []
    for (mode, system, workers), r in sorted(by.items()):
        if system != "tether" or mode != "throughput":
            continue
        dbos = by.get((mode, "dbos", workers))
        ratio = f", {r['throughput'] / dbos['throughput']:.2f}x DBOS" if dbos else ""
        met = r["throughput"] >= TARGET_RUNS_S and r["fraction"] >= TARGET_FRACTION
        met = met and (dbos is None or r["throughput"] >= TARGET_RATIO * dbos["throughput"])
        lines.append(
            f"target {workers} worker(s): >= {TARGET_RUNS_S:.0f} runs/s, >= {TARGET_FRACTION} of "
            f"ceiling/commits, >= {TARGET_RATIO:.0f}x DBOS: {r['throughput']:.0f} runs/s, "
            f"{r['fraction']:.2f}{ratio}: {'MET' if met else 'NOT MET'}"
        )
    latency = by.get(("latency", "tether", 1))
    if latency is not None:
        met = latency["start_p99_ms"] <= TARGET_START_P99_MS
        lines.append(
            f"target start p99 <= {TARGET_START_P99_MS:.0f} ms: {latency['start_p99_ms']:.2f} ms: "
            f"{'MET' if met else 'NOT MET'}"
        )
    return lines


def _report(out: dict[str, Any], settings: dict[str, str], args: argparse.Namespace) -> str:
    ceiling = sum(out["ceiling"]) / len(out["ceiling"])
    results = out["results"]
    mode = (
        "one run per statement"
        if args.tether_batch == 1
        else f"{args.tether_batch} runs per statement"
    )
    lines = [
        "PostgreSQL " + ", ".join(f"{k}={v}" for k, v in settings.items()),
        "commit ceiling (16 lanes of single-row INSERT commits): "
        + " / ".join(f"{c:.0f}" for c in out["ceiling"])
        + f" commits/s (start / end), mean {ceiling:.0f}",
        f"{WORKERS_PER_PROCESS} runs in flight per worker process; Tether starts {mode}",
        "",
        f"throughput ({args.runs} runs):",
        *_throughput_lines([r for r in results if r["mode"] == "throughput"], ceiling),
    ]
    drains = [r for r in results if r["mode"] == "drain"]
    if drains:
        lines += [
            "",
            f"drain ({args.drain_runs} runs queued, then the workers start):",
            *_drain_lines(drains),
        ]
    latencies = [r for r in results if r["mode"] == "latency"]
    if latencies:
        lines += ["", "start latency (1 worker process up):", *_latency_lines(latencies, args.rate)]
    return "\n".join([*lines, "", *_verdicts(results)])


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="per throughput run; 0 skips it")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--drain-runs", type=int, default=2000, help="0 skips the drain")
    parser.add_argument("--latency-starts", type=int, default=1000, help="0 skips it")
    parser.add_argument("--rate", type=float, default=200.0, help="starts/s of the latency run")
    parser.add_argument(
        "--tether-batch", type=int, default=1, help="Tether runs per start statement"
    )
    parser.add_argument("--ceiling-seconds", type=float, default=3.0)
    parser.add_argument("--dsn", help="PostgreSQL URL with CREATEDB rights (default: embedded)")
    parser.add_argument("--skip-dbos", action="store_true", help="measure Tether only")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    return parser.parse_args(argv)


async def _main(args: argparse.Namespace) -> int:
    with _server(args.dsn) as dsn:
        settings = await _server_settings(dsn)
        out = await _benchmark(dsn, args)
    print(_report(out, settings, args))
    if args.json:
        args.json.write_bytes(
            orjson.dumps({**out, "settings": settings, "args": vars(args)}, default=str)
        )
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
