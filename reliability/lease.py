"""Lease phase: a worker paused (SIGSTOP) past its lease while another takes over.

Worker A (TETHER_LEASE_S=2, REL_HOLD_S set) claims every run and stops inside the second
transaction step with its insert done but not committed; the driver sees all of them open in
pg_stat_activity and SIGSTOPs A. Worker B claims the runs once the leases expire and completes
them. On SIGCONT, A's checkpoints are fenced by (lease_owner, attempt) and refused, so its open
transactions roll back: every effect exists exactly once, written by B.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from datetime import datetime
from pathlib import Path

import asyncpg

from reliability import app as rel_app
from reliability.cluster import Cluster, poll_until, wait_ready
from reliability.report import PhaseReport
from reliability.runs import Plan, RunResult
from reliability.verify import judge
from tether.runtime.operations import Operations
from tether.tasks.service import TaskService

LEASE_S = 2.0
HOLD_S = 3.0


async def _open_in_t2(db: asyncpg.Pool) -> int:
    count: int = await db.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tether'"
        " AND state = 'idle in transaction' AND query LIKE 'INSERT INTO rel_effects%'"
    )
    return count


async def _effects_by(db: asyncpg.Pool, ids: list[str], pid: int, step: str) -> int:
    n: int = await db.fetchval(
        "SELECT count(*) FROM rel_effects WHERE execution_id = ANY($1) AND pid = $2 AND step = $3",
        ids,
        pid,
        step,
    )
    return n


async def _as_driver_saw(ops: Operations, plan: Plan, rid: str) -> RunResult:
    """The real task view of the run (tasks/get's own rendering), as a driver would see it."""
    service = TaskService(ops, served=lambda _wf: True)
    view = service.render(await ops.get(rid), elicitation=True)
    return RunResult(plan, rid, view)


async def run_lease(uri: str, db: asyncpg.Pool, logs: Path, *, runs: int) -> PhaseReport:
    report = PhaseReport("lease", runs=runs)
    t0 = time.monotonic()
    env = {
        "TETHER_LEASE_S": str(LEASE_S),
        "TETHER_WORKERS": str(runs),
        "TETHER_POLL_S": "0.1",
        "TETHER_POOL_SIZE": str(runs + 4),  # every run holds a connection while A is frozen
    }
    cluster = Cluster(uri, logs, servers=0, workers=2, **env)
    a, b = cluster.workers
    a.label, b.label = "lease-A", "lease-B"
    a.env["REL_HOLD_S"] = str(HOLD_S)
    ops = Operations(db, rel_app.app)
    try:
        a.spawn()
        await wait_ready(a)
        plans = [Plan(n, "lease", "rel_lease", {"n": n}, "completed") for n in range(runs)]
        ids = []
        for plan in plans:
            started = await ops.start("rel_lease", plan.input, idempotency_key=plan.key)
            ids.append(started.execution.id)

        async def all_open() -> bool:
            return await _open_in_t2(db) >= runs

        await poll_until(all_open, 30, "A inside t2 for every run")
        os.kill(a.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        stopped_wall: datetime = await db.fetchval("SELECT clock_timestamp()")
        b.spawn()
        await wait_ready(b)

        async def all_done() -> bool:
            n: int = await db.fetchval(
                "SELECT count(*) FROM executions WHERE id = ANY($1) AND status = 'completed'",
                ids,
            )
            return n == runs

        await poll_until(all_done, 60, "B completes every run")
        # Stay paused until A's held transactions are overdue too, so that on SIGCONT they
        # race their fenced checkpoints against A's own heartbeat noticing the lost leases.
        await asyncio.sleep(max(stopped_at + HOLD_S + 1.0 - time.monotonic(), 0.0))
        paused = time.monotonic() - stopped_at
        open_while_paused = await _open_in_t2(db)
        os.kill(a.pid, signal.SIGCONT)

        async def a_settled() -> bool:
            return await _open_in_t2(db) == 0

        await poll_until(a_settled, 30, "A's transactions end")
        resumed_wall: datetime = await db.fetchval("SELECT clock_timestamp()")
        refused = a.log_text().count("lease on a run was lost")
        results = [
            await _as_driver_saw(ops, plan, rid) for plan, rid in zip(plans, ids, strict=True)
        ]
        verdict = await judge(report, db, plans, results)
        by_a = await _effects_by(db, ids, a.pid, "l2")
        while_paused = await db.fetchval(
            "SELECT count(*) FROM rel_effects WHERE execution_id = ANY($1) AND pid = $2"
            " AND at >= $3 AND at <= $4",
            ids,
            a.pid,
            stopped_wall,
            resumed_wall,
        )
        attempts = await db.fetch("SELECT attempt FROM executions WHERE id = ANY($1)", ids)
        if open_while_paused < runs:
            report.problems.append(
                f"only {open_while_paused}/{runs} of A's writes were in flight: nothing tested"
            )
        if by_a:
            report.problems.append(f"{by_a} l2 effects written by the paused worker")
        if while_paused:
            report.problems.append(f"{while_paused} effects by A stamped while it was paused")
        if not a.alive:
            report.problems.append("worker A died after SIGCONT")
        if any(r["attempt"] < 2 for r in attempts):
            report.problems.append("a run was not taken over by B (attempt < 2)")
        report.recovered = verdict.recovered + sum(r["attempt"] >= 2 for r in attempts)
        report.figures["paused past lease"] = f"{paused:.1f}s (lease {LEASE_S:g}s)"
        report.figures["A writes in flight while B finished"] = f"{open_while_paused}/{runs}"
        report.figures["A writes refused (committed by A: l2 / while paused)"] = (
            f"{runs - by_a}/{runs} ({by_a} / {while_paused}); fence refusals logged {refused}"
        )
        report.figures["attempts per run"] = str(sorted({r["attempt"] for r in attempts}))
    except TimeoutError as exc:
        report.problems.append(f"bounded wait expired: {exc!r}")
    finally:
        for proc in (a, b):
            if proc.alive:
                os.kill(proc.pid, signal.SIGCONT)
        await asyncio.to_thread(cluster.stop)
        cluster.close()
        report.seconds = time.monotonic() - t0
    return report
