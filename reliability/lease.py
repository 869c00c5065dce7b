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
from pathlib import Path

import asyncpg

from reliability import app as rel_app
from reliability.cluster import Cluster, poll_until, wait_ready
from reliability.report import PhaseReport
from reliability.runs import Plan, RunResult
from reliability.verify import verify
from tether.runtime.operations import Operations

LEASE_S = 2.0
HOLD_S = 3.0


async def _open_in_t2(db: asyncpg.Pool) -> int:
    count: int = await db.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tether'"
        " AND state = 'idle in transaction' AND query LIKE 'INSERT INTO rel_effects%'"
    )
    return count


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
            started = await ops.start("rel_lease", plan.body, idempotency_key=plan.key)
            ids.append(started.execution.id)

        async def all_open() -> bool:
            return await _open_in_t2(db) >= runs

        await poll_until(all_open, 30, "A inside t2 for every run")
        os.kill(a.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
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
        refused = a.log_text().count("lease on a run was lost")
        results = []
        for plan, rid in zip(plans, ids, strict=True):
            view = await ops.get(rid)
            final = {"status": "completed", "result": {"isError": False}}
            results.append(
                RunResult(plan, rid, final if view.current.status == "completed" else None)
            )
        verdict = await verify(db, plans, results)
        by_a: int = await db.fetchval(
            "SELECT count(*) FROM rel_effects WHERE execution_id = ANY($1) AND pid = $2"
            " AND step = 'l2'",
            ids,
            a.pid,
        )
        attempts = await db.fetch("SELECT attempt FROM executions WHERE id = ANY($1)", ids)
        report.lost, report.duplicated = verdict.lost, verdict.duplicated
        report.problems += verdict.problems
        if by_a:
            report.problems.append(f"{by_a} l2 effects written by the paused worker")
        if not a.alive:
            report.problems.append("worker A died after SIGCONT")
        report.figures["paused past lease"] = f"{paused:.1f}s (lease {LEASE_S:g}s)"
        report.figures["A transactions open while B finished"] = str(open_while_paused)
        report.figures["A writes refused by the fence (logged)"] = str(refused)
        report.figures["A effects applied after resuming"] = str(by_a)
        report.figures["attempts per run"] = str(sorted({r["attempt"] for r in attempts}))
        report.figures["runs ended as expected"] = f"{verdict.ended_ok}/{runs}"
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
