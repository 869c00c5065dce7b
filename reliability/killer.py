"""Chaos phase: runs through the MCP endpoint while a killer SIGKILLs a random `tether serve` or
`tether worker` every few seconds and starts it again (one process down at a time, a bounded
number of kills)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time

import asyncpg

from reliability.client import Client
from reliability.cluster import Cluster
from reliability.report import PhaseReport
from reliability.runs import Driver, drive, make_plans
from reliability.verify import judge


async def killer(
    cluster: Cluster,
    rng: random.Random,
    *,
    every_s: float,
    max_kills: int,
    stop: asyncio.Event,
    report: PhaseReport,
) -> None:
    restarts: list[float] = []
    while report.kills < max_kills and not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), rng.uniform(0.5, 1.5) * every_s)
        if stop.is_set():
            break
        proc = rng.choice(cluster.procs)
        await asyncio.to_thread(proc.kill)
        report.kills += 1
        await asyncio.sleep(rng.uniform(0.0, 1.0))  # downtime before the restart
        restarts.append(await cluster.restart(proc))
    if restarts:
        report.figures["restart to ready (max s)"] = f"{max(restarts):.1f}"
    killed = {p.label: p.starts - 1 for p in cluster.procs if p.starts > 1}
    report.figures["kills by process"] = str(killed)


async def run_killer(
    cluster: Cluster,
    db: asyncpg.Pool,
    rng: random.Random,
    *,
    runs: int,
    every_s: float,
    max_kills: int,
    concurrency: int,
    deadline_s: float,
) -> PhaseReport:
    report = PhaseReport("chaos", runs=runs)
    t0 = time.monotonic()
    client = Client(report.ledger)
    plans = make_plans("chaos", runs, rng)
    driver = Driver(client, cluster.servers, rng, deadline_s=deadline_s)
    stop = asyncio.Event()
    kill_task = asyncio.create_task(
        killer(cluster, rng, every_s=every_s, max_kills=max_kills, stop=stop, report=report)
    )
    try:
        # Spread the starts over the time the kills take (the pause, plus ~2.5 s down and restart).
        results = await drive(driver, plans, concurrency, spread_s=(every_s + 2.5) * max_kills)
    finally:
        stop.set()
        await kill_task
        await client.aclose()
    report.bad_503 = report.ledger.unexplained_503  # no database outage in this phase
    verdict = await judge(report, db, plans, results)
    report.figures["answers delivered"] = str(verdict.answers)
    report.figures["tasks/update sent"] = str(sum(r.answers_sent for r in results))
    report.figures["tasks/cancel sent"] = str(sum(r.cancels_sent for r in results))
    report.seconds = time.monotonic() - t0
    return report
