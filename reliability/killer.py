"""Chaos phase: runs through the MCP endpoint while a killer SIGKILLs a `tether serve` or
`tether worker` every few seconds and starts it again (one process down at a time, a bounded
number of kills).

Every other kill targets a process that is inside a plain step right now (the recorder holds
one of its calls), so kills land inside runs; the others pick any process. The phase must show
that recovery happened, or it failed as "proved nothing": at least one kill landed inside a run,
and at least one run was finished by another process after its lease was lost (a run the kill
cut off inside a step that then ended as planned, or a `rel_steps` run, which never parks,
with attempt > 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time

import asyncpg

from reliability.client import Client
from reliability.cluster import Cluster
from reliability.recorder import Recorder
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
    recorder: Recorder,
    cut_runs: set[str],
) -> None:
    restarts: list[float] = []
    while report.kills < max_kills and not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), rng.uniform(0.5, 1.5) * every_s)
        if stop.is_set():
            break
        inside = recorder.inflight_pids()
        busy = [p for p in cluster.procs if p.alive and p.pid in inside]
        proc = rng.choice(busy if busy and report.kills % 2 == 0 else cluster.procs)
        cut = recorder.inflight_runs(proc.pid) if proc.alive else set()
        if cut:
            report.kills_inside += 1
            cut_runs.update(cut)
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
    recorder: Recorder,
) -> PhaseReport:
    report = PhaseReport("chaos", runs=runs)
    t0 = time.monotonic()
    client = Client(report.ledger)
    plans = make_plans("chaos", runs, rng)
    driver = Driver(client, cluster.servers, rng, deadline_s=deadline_s)
    stop = asyncio.Event()
    cut_runs: set[str] = set()  # runs a kill cut off inside a plain step
    kill_task = asyncio.create_task(
        killer(
            cluster,
            rng,
            every_s=every_s,
            max_kills=max_kills,
            stop=stop,
            report=report,
            recorder=recorder,
            cut_runs=cut_runs,
        )
    )
    try:
        # Spread the starts over the time the kills take (the pause, plus ~2.5 s down and restart).
        results = await drive(driver, plans, concurrency, spread_s=(every_s + 2.5) * max_kills)
    finally:
        stop.set()
        await kill_task
        await client.aclose()
    report.bad_503 = report.ledger.unexplained_503  # no database outage in this phase
    verdict = await judge(report, db, plans, results, recorder.for_phase("chaos"))
    # Recovered: finished by another process after a kill cut them off inside a step, or
    # three-step runs (they never park) that needed a second claim.
    report.recovered = len((cut_runs & verdict.ok_ids) | verdict.resumed_ids)
    report.figures["runs cut off by a kill / finished elsewhere"] = (
        f"{len(cut_runs)} / {len(cut_runs & verdict.ok_ids)}"
    )
    if report.kills_inside == 0:
        report.problems.append("proved nothing: no kill landed inside a run")
    if report.recovered == 0:
        report.problems.append(
            "proved nothing: no run was resumed by another process after a kill (attempt > 1)"
        )
    report.figures["answers delivered"] = str(verdict.answers)
    report.figures["tasks/update sent"] = str(sum(r.answers_sent for r in results))
    report.figures["tasks/cancel sent"] = str(sum(r.cancels_sent for r in results))
    report.seconds = time.monotonic() - t0
    return report
