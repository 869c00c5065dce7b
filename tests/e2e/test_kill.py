"""SIGKILL a worker process mid-run: a second worker finishes every run and no completed step
runs again (transaction steps by construction, the plain step because no kill lands inside it).
"""

from __future__ import annotations

import asyncio
import signal
from collections import defaultdict

import asyncpg
import pytest

from tests.apps.killable import KILL_POINTS, Receipt, app
from tests.e2e.conftest import Workers, wait_exit
from tether.runtime.operations import Operations, RunView

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.slow]

RUNS = 5
STEPS = ("t1", "plain", "t2", "t3")

# What the killed run had committed when its worker died at each point.
COMMITTED_BEFORE_KILL: dict[str, frozenset[str]] = {
    "in_t1": frozenset(),
    "after_t1": frozenset({"t1"}),
    "after_plain": frozenset({"t1", "plain"}),
    "after_t2": frozenset({"t1", "plain", "t2"}),
    "after_sleep": frozenset({"t1", "plain", "t2"}),
    "before_return": frozenset(STEPS),
}


@pytest.mark.parametrize("point", KILL_POINTS)
async def test_a_sigkilled_worker_never_causes_a_completed_step_to_run_again(
    point: str, db: asyncpg.Pool, workers: Workers
) -> None:
    """Worker 1 dies by SIGKILL at `point`; worker 2 completes every run, each step once."""
    await db.execute(
        "CREATE TABLE side_effects (id bigserial PRIMARY KEY, execution_id text NOT NULL,"
        " step text NOT NULL, pid integer NOT NULL)"
    )
    ops = Operations(db, app)
    ids = [(await ops.start("durable_steps", {"n": n})).execution.id for n in range(RUNS)]

    # One run at a time in worker 1, so the kill never lands inside another run's plain step.
    first = workers.spawn("worker1", KILL_AT=point, TETHER_WORKERS="1", TETHER_LEASE_S="1")
    code = await wait_exit(first, 60)
    assert code == -signal.SIGKILL, f"worker 1 exited {code}:\n{workers.log('worker1')}"

    # A longer lease: worker 2 must not lose a live lease to itself on a slow machine.
    second = workers.spawn("worker2", TETHER_WORKERS="8", TETHER_LEASE_S="5")
    views: dict[str, RunView] = {}
    async with asyncio.timeout(60):
        for rid in ids:
            views[rid] = await ops.wait_for_end(rid, timeout=60)
    second.send_signal(signal.SIGTERM)
    code = await wait_exit(second, 20)
    assert code == 0, f"worker 2 exited {code}:\n{workers.log('worker2')}"

    rows = await db.fetch("SELECT id, execution_id, step, pid FROM side_effects")
    by_run: dict[str, dict[str, list[asyncpg.Record]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        by_run[row["execution_id"]][row["step"]].append(row)
    assert set(by_run) == set(ids)
    for n, rid in enumerate(ids):
        run = views[rid].current
        assert run.id == rid
        assert run.status == "completed", (run.status, run.error)
        receipt = Receipt.model_validate(run.output)
        assert receipt.n == n
        counts = {step: len(found) for step, found in by_run[rid].items()}
        assert counts == dict.fromkeys(STEPS, 1), f"run {n}: {counts}"
        # The output holds the recorded results: the ids of the rows that exist.
        assert receipt.ids == {step: by_run[rid][step][0]["id"] for step in STEPS}
        ended = [ev for ev in await ops.history(rid) if ev.type == "ended"]
        assert [ev.data["status"] for ev in ended] == ["completed"], f"run {n}: {ended}"

    # Evidence the kill landed where intended: the killed run committed exactly these steps in
    # worker 1 and the rest in worker 2.
    assert {row["pid"] for row in rows} <= {first.pid, second.pid}
    committed = COMMITTED_BEFORE_KILL[point]
    if not committed:
        assert all(row["pid"] == second.pid for row in rows)
    else:
        assert any(
            {step for step, found in steps.items() if found[0]["pid"] == first.pid} == committed
            for steps in by_run.values()
        ), [(r["execution_id"][:8], r["step"], r["pid"]) for r in rows]
