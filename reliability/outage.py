"""Outage phase: PostgreSQL restarted mid-load (`pg_ctl restart -m fast`), then stopped for
`outage_s` seconds and started again, while runs are driven through MCP.

While the database is down, a prober asks every server for `tasks/get` (needs the database:
must answer 503 / -31000 within the request timeout, never hang or drop the connection) and
`tools/list` (needs nothing: must still answer). Afterwards every server must report its LISTEN
connection back (`/healthz` listening) by itself, no process may have died, and every run must
end as planned with each effect exactly once.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable

import asyncpg

from reliability.client import Client, Ledger
from reliability.cluster import Cluster, Postgres, Proc, healthz, poll_until
from reliability.recorder import Recorder
from reliability.report import PhaseReport
from reliability.runs import Driver, drive, make_plans
from reliability.verify import judge


async def _probe(
    client: Client, cluster: Cluster, task_id: str, stop: asyncio.Event, seen: Ledger
) -> None:
    """While the database is down: tasks/get and tools/list on every server, twice a second."""
    while not stop.is_set():
        for proc in cluster.servers:
            out = await client.call(proc, "tasks/get", {"taskId": task_id})
            seen.add(out)
            listing = await client.call(proc, "tools/list", {})
            if listing.kind != "ok":
                seen.violations.append(f"tools/list during outage: {listing.kind} {listing.status}")
        await asyncio.sleep(0.5)  # probe pacing


async def run_outage(
    cluster: Cluster,
    pg: Postgres,
    db: asyncpg.Pool,
    rng: random.Random,
    *,
    runs: int,
    outage_s: float,
    concurrency: int,
    recorder: Recorder,
) -> PhaseReport:
    report = PhaseReport("outage", runs=runs)
    t0 = time.monotonic()
    if not pg.controllable:
        report.skipped = pg.why_not_controllable
        return report
    report.figures["database"] = "external (TETHER_PG_*_CMD)" if pg.external else "embedded"
    client = Client(report.ledger, timeout=30.0)
    starts_before = {p.label: p.starts for p in cluster.procs}
    plans = make_plans("outage", runs, rng)
    driver = Driver(client, cluster.servers, rng, deadline_s=600.0)
    load = asyncio.create_task(drive(driver, plans, concurrency, spread_s=outage_s * 3))
    try:
        await poll_until(
            lambda: _at_least(driver, runs // 3, load), 120, "a third of the runs created"
        )
        t = time.monotonic()
        await asyncio.to_thread(pg.restart)
        report.outages += 1
        report.figures["pg_ctl restart took"] = f"{time.monotonic() - t:.1f}s"
        await poll_until(
            lambda: _at_least(driver, 2 * runs // 3, load), 180, "two thirds of the runs created"
        )
        probe_task_id = await _some_task(db)
        socket_dir = await asyncio.to_thread(pg.stop)
        report.outages += 1
        down_at = time.monotonic()
        during = Ledger()
        stop = asyncio.Event()
        prober = asyncio.create_task(_probe(client, cluster, probe_task_id, stop, during))
        await asyncio.sleep(outage_s)  # the outage itself
        stop.set()
        await prober
        await asyncio.to_thread(pg.start, socket_dir)
        report.figures["outage"] = f"{time.monotonic() - down_at:.1f}s"
        report.figures["during outage: tasks/get"] = (
            f"{during.counts['retryable']} x 503/-31000, {during.counts['ok']} ok, "
            f"{during.counts['violation']} other; slowest {during.max_latency:.2f}s"
        )
        report.problems += [f"during outage: {v}" for v in during.violations]
        if during.counts["retryable"] == 0:
            report.problems.append("no 503/-31000 seen while the database was down")
        back = await asyncio.gather(
            *(poll_until(_listener_of(p), 60, f"{p.label} listening") for p in cluster.servers)
        )
        report.figures["LISTEN back after start (max)"] = f"{max(back):.1f}s"
        results = await load
    except TimeoutError as exc:
        report.problems.append(str(exc))
        load.cancel()
        results = []
    finally:
        await client.aclose()
    restarted = [
        p.label for p in cluster.procs if p.starts != starts_before[p.label] or not p.alive
    ]
    if restarted:
        report.problems.append(f"processes died during the outage phase: {restarted}")
    if results:
        await judge(report, db, plans, results, recorder.for_phase("outage"))
    report.seconds = time.monotonic() - t0
    return report


async def _at_least(driver: Driver, created: int, load: asyncio.Task[object]) -> bool:
    return driver.created >= created or load.done()


def _listener_of(proc: Proc) -> Callable[[], Awaitable[bool]]:
    async def listening() -> bool:
        body = await healthz(proc)
        return bool(body and body.get("listening"))

    return listening


async def _some_task(db: asyncpg.Pool) -> str:
    task_id: str = await db.fetchval(
        "SELECT id FROM executions WHERE input->>'phase' = 'outage' LIMIT 1"
    )
    return task_id
