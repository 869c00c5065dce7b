"""The reliability suite driver: `python -m reliability.chaos [--short] [--only PHASES]`.

Phases (in this order, on one PostgreSQL):
  lease   a worker paused (SIGSTOP) past its lease inside a transaction step; another worker
          takes over; on SIGCONT its fenced writes are refused and nothing is applied twice.
  fuzz    generated bad requests, documents (inline DAG specs, create_workflow plans) and
          console forms: zero 5xx, zero rows changed, every server responsive throughout.
  chaos   runs through MCP while random processes are SIGKILLed and restarted.
  outage  PostgreSQL restarted mid-load, then stopped for an outage, then started again.
  soak    70% of the measured tasks/get maximum plus a steady start rate; RSS, fds and
          connections must stay flat.

Every child process is killed on exit, also on Ctrl-C and SIGTERM; every loop is bounded and the
whole suite has a hard time limit. Exit status 0 only when every phase ran and passed; 1 when
one failed; 2 when one was SKIPPED (e.g. the outage phase on an external server without
TETHER_PG_STOP_CMD / TETHER_PG_START_CMD): a skipped phase is never reported as a pass.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import platform
import random
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from reliability import app as rel_app
from reliability.cluster import Cluster, Postgres
from reliability.fuzz import BODY_CAP as FUZZ_BODY_CAP
from reliability.fuzz import write_dags
from reliability.recorder import Recorder
from reliability.report import PhaseReport, details, overall, table, write_markdown
from tether.storage import migrate
from tether.storage.pool import init_connection

PHASES = ("lease", "fuzz", "chaos", "outage", "soak")


@dataclass(frozen=True)
class Config:
    chaos_runs: int
    chaos_kills: int
    kill_every_s: float
    outage_runs: int
    outage_s: float
    lease_runs: int
    soak_s: float
    soak_warmup_s: float
    fuzz_requests: int
    concurrency: int
    hard_limit_s: float


FULL = Config(
    chaos_runs=1000,
    chaos_kills=40,
    kill_every_s=4.0,
    outage_runs=300,
    outage_s=30.0,
    lease_runs=16,
    soak_s=600.0,
    soak_warmup_s=60.0,
    fuzz_requests=100_000,
    concurrency=60,
    hard_limit_s=3600.0,
)
SHORT = Config(
    chaos_runs=150,
    chaos_kills=8,
    kill_every_s=3.0,
    outage_runs=60,
    outage_s=8.0,
    lease_runs=6,
    # windows 30-45 s, 82-98 s and 135-150 s: a 1 MiB/min leak grows ~0.9 MiB in each half
    soak_s=150.0,
    soak_warmup_s=30.0,
    fuzz_requests=10_000,
    concurrency=40,
    hard_limit_s=540.0,
)


async def driver_pool(uri: str) -> asyncpg.Pool:
    pool = await asyncpg.create_pool(
        uri,
        min_size=0,
        max_size=4,
        init=init_connection,
        server_settings={"application_name": "rel-driver"},
    )
    assert pool is not None
    return pool


async def prepare(uri: str) -> None:
    conn = await asyncpg.connect(uri)
    try:
        await migrate.migrate(conn)
        await conn.execute(rel_app.SCHEMA)
    finally:
        await conn.close()


async def suite(
    args: argparse.Namespace, cfg: Config, pg: Postgres, logs: Path
) -> list[PhaseReport]:
    import importlib

    def phase(name: str) -> Callable[..., Awaitable[PhaseReport]]:
        module = importlib.import_module(f"reliability.{name}")
        fn: Callable[..., Awaitable[PhaseReport]] = getattr(module, "run_" + name.split(".")[0])
        return fn

    rng = random.Random(args.seed)
    await prepare(pg.uri)
    db = await driver_pool(pg.uri)
    recorder = Recorder(db)
    await recorder.start()
    reports: list[PhaseReport] = []
    phases = [p for p in PHASES if p in args.only]
    cluster: Cluster | None = None
    try:
        if "lease" in phases:
            lease = phase("lease")
            reports.append(
                await _contained("lease", lambda: lease(pg.uri, db, logs, runs=cfg.lease_runs))
            )
            _progress(reports[-1])
        cluster_phases = [p for p in phases if p != "lease"]
        if cluster_phases:
            # The fuzz phase also drives the console, inline DAG specs (a DAG directory makes
            # the dagu_execute tool served) and create_workflow (reliability/app.py allows it).
            dags = write_dags(logs / "dags")
            cluster = Cluster(
                pg.uri,
                logs,
                servers=3,
                workers=2,
                REL_RECORDER_URL=recorder.url,
                TETHER_CONSOLE="true",
                TETHER_DAGS=str(dags),
                TETHER_MAX_BODY_BYTES=str(FUZZ_BODY_CAP),
            )
            _CLEANUP.append(cluster.close)
            await cluster.start()
        steps: dict[str, Callable[[], Awaitable[PhaseReport]]] = {}
        if cluster is not None:
            c = cluster
            steps = {
                "fuzz": lambda: phase("fuzz")(c, db, rng, requests=cfg.fuzz_requests),
                "chaos": lambda: phase("killer")(
                    c,
                    db,
                    rng,
                    runs=cfg.chaos_runs,
                    every_s=cfg.kill_every_s,
                    max_kills=cfg.chaos_kills,
                    concurrency=cfg.concurrency,
                    deadline_s=600.0,
                    recorder=recorder,
                ),
                "outage": lambda: phase("outage")(
                    c,
                    pg,
                    db,
                    rng,
                    runs=cfg.outage_runs,
                    outage_s=cfg.outage_s,
                    concurrency=cfg.concurrency,
                    recorder=recorder,
                ),
                "soak": lambda: phase("soak")(
                    c,
                    db,
                    rng,
                    duration_s=cfg.soak_s,
                    warmup_s=cfg.soak_warmup_s,
                    recorder=recorder,
                ),
            }
        for name in cluster_phases:
            reports.append(await _contained(name, steps[name]))
            _progress(reports[-1])
        if cluster is not None:
            crashed = [p.label for p in cluster.procs if not p.alive]
            if crashed:
                reports[-1].problems.append(f"processes not alive at the end: {crashed}")
            await asyncio.to_thread(cluster.stop)
    finally:
        if cluster is not None:
            cluster.close()
        await recorder.close()
        await db.close()
    return reports


async def _contained(name: str, run: Callable[[], Awaitable[PhaseReport]]) -> PhaseReport:
    """A phase that crashes is a failed phase; the suite goes on with the next one."""
    t0 = time.monotonic()
    try:
        return await run()
    except Exception as exc:  # noqa: BLE001 — reported as the phase's failure
        report = PhaseReport(name)
        report.problems.append(f"phase crashed: {type(exc).__name__}: {exc}")
        report.seconds = time.monotonic() - t0
        return report


def _progress(report: PhaseReport) -> None:
    print(
        f"[{time.strftime('%H:%M:%S')}] {report.phase}: {report.result} in {report.seconds:.0f}s",
        flush=True,
    )


_CLEANUP: list[Callable[[], None]] = []


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m reliability.chaos", description=__doc__)
    p.add_argument("--short", action="store_true", help="the CI version (a few minutes)")
    p.add_argument("--only", default=",".join(PHASES), help="comma-separated phases")
    p.add_argument("--seed", type=int, default=20260728)
    p.add_argument("--write", type=Path, help="write the summary as Markdown to this file")
    p.add_argument("--logs", type=Path, help="keep process logs here (default: a temp dir)")
    args = p.parse_args(argv)
    args.only = [x.strip() for x in args.only.split(",") if x.strip()]
    unknown = set(args.only) - set(PHASES)
    if unknown:
        p.error(f"unknown phases {sorted(unknown)}; choose from {PHASES}")
    cfg = SHORT if args.short else FULL
    logging.getLogger("asyncpg").setLevel(logging.ERROR)  # the driver's pool during outages
    logs = args.logs or Path(tempfile.mkdtemp(prefix="tether-rel-"))
    logs.mkdir(parents=True, exist_ok=True)
    command = "python -m reliability.chaos " + " ".join(
        shlex.quote(a) for a in (argv or sys.argv[1:])
    )
    print(
        f"reliability suite ({'short' if args.short else 'full'}): phases {args.only}; "
        f"seed {args.seed}; logs in {logs}",
        flush=True,
    )
    t0 = time.monotonic()
    pg = Postgres()
    _CLEANUP.append(pg.close)
    reports: list[PhaseReport] = []
    try:
        reports = asyncio.run(_guarded(args, cfg, pg, logs))
    except KeyboardInterrupt:
        print("interrupted: stopping every child process", file=sys.stderr)
        return 130
    except TimeoutError:
        print(f"hard time limit of {cfg.hard_limit_s:.0f}s reached", file=sys.stderr)
        return 1
    finally:
        for fn in reversed(_CLEANUP):
            with contextlib.suppress(Exception):
                fn()
    print()
    print(table(reports))
    print()
    print(details(reports))
    verdict = overall(reports, len(args.only))
    print(f"\n{verdict}")
    print(f"total {time.monotonic() - t0:.0f}s")
    with (logs / "problems.txt").open("w", encoding="utf-8") as fh:
        for r in reports:
            for line in [*r.problems, *r.ledger.violations]:
                fh.write(f"{r.phase}: {line}\n")
    if args.write:
        env = f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
        write_markdown(args.write, command, reports, env, len(args.only))
    if verdict.startswith("PASS"):
        return 0
    return 2 if verdict.startswith("INCOMPLETE") else 1


async def _guarded(
    args: argparse.Namespace, cfg: Config, pg: Postgres, logs: Path
) -> list[PhaseReport]:
    """The suite under a hard time limit; SIGTERM and SIGINT cancel it (children are killed
    by the cleanup in main)."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    try:
        async with asyncio.timeout(cfg.hard_limit_s):
            return await suite(args, cfg, pg, logs)
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None


if __name__ == "__main__":
    sys.exit(main())
