"""Queues and max_active_runs (modelled on Dagu's queues): a run on a queue waits (`queued`)
until the queue has room, is admitted oldest first, and holds its slot until it ends — across
any number of worker loops and processes."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from tests.waiting import until, waiting_on_a_lock
from tether.runtime import errors
from tether.runtime.admission import Admission, implicit_queue
from tether.runtime.context import Context
from tether.runtime.registry import App
from tether.storage.admitting import admit
from tether.storage.driver import Queryable
from tether.storage.queries import Q

from .conftest import Start, eventually

pytestmark = pytest.mark.postgres


def _app() -> App:
    app = App()

    @app.workflow(queue="reports")
    async def report(ctx: Context) -> str:
        value: str = await ctx.wait_for_signal("go")
        return value

    @app.workflow(max_active_runs=1)
    async def deploy(ctx: Context) -> str:
        value: str = await ctx.wait_for_signal("go")
        return value

    @app.workflow
    async def plain(ctx: Context) -> str:
        value: str = await ctx.wait_for_signal("go")
        return value

    return app


def max_overlap(spans: list[tuple[datetime, datetime]]) -> int:
    """The most spans [admitted, ended) open at one instant."""
    edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    best = open_ = 0
    for _, step in edges:
        open_ += step
        best = max(best, open_)
    return best


async def _holding(pool: Queryable, queue: str) -> int:
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM executions WHERE queue = $1 AND admitted_at IS NOT NULL"
            " AND ended_at IS NULL",
            queue,
        )
    )


async def test_a_queue_never_runs_more_than_its_limit_across_two_processes_and_admits_fifo(
    start: Start,
) -> None:
    """Two runtimes (separate pools and listeners, two worker loops each) share a queue of
    limit 2: 8 runs started at once; at no instant do more than 2 hold a slot (from the rows'
    admitted/ended times), they are admitted in creation order, and all of them complete."""
    app = _app()
    adm = Admission(queues={"reports": 2})
    async with start(app, adm, workers=2) as one, start(app, adm, workers=2) as two:
        started = await asyncio.gather(*(one.ops.start("report") for _ in range(4)))
        started += await asyncio.gather(*(two.ops.start("report") for _ in range(4)))
        ids = [s.execution.id for s in started]
        assert all(s.execution.queued and s.execution.status == "pending" for s in started)

        async def parked() -> bool:
            n = await one.pool.fetchval(
                "SELECT count(*) FROM executions WHERE status = 'waiting' AND queue = 'reports'"
            )
            return int(n) == 2

        await eventually(one, parked)
        assert await _holding(one.pool, "reports") == 2
        for _ in range(len(ids)):  # release the admitted runs one at a time
            holders = await one.pool.fetch(
                "SELECT id FROM executions WHERE queue = 'reports' AND status = 'waiting'"
            )
            assert holders, "a run should be admitted while others wait"
            done = holders[0]["id"]
            await two.ops.signal(done, "go", "ok")
            await one.ops.wait_for_end(done, timeout=10)

            async def refilled() -> bool:
                queued = await one.pool.fetchval(
                    "SELECT count(*) FROM executions WHERE queue = 'reports'"
                    " AND admitted_at IS NULL"
                )
                waiting = await one.pool.fetchval(
                    "SELECT count(*) FROM executions WHERE queue = 'reports' AND status = 'waiting'"
                )
                return int(waiting) == min(2, int(waiting) + int(queued))

            await eventually(one, refilled)
            assert await _holding(one.pool, "reports") <= 2
        rows = await one.pool.fetch(
            "SELECT id, status, created_at, admitted_at, ended_at FROM executions"
            " WHERE id = ANY($1::text[])",
            ids,
        )
    assert {r["status"] for r in rows} == {"completed"}
    assert max_overlap([(r["admitted_at"], r["ended_at"]) for r in rows]) == 2
    by_created = [r["id"] for r in sorted(rows, key=lambda r: (r["created_at"], r["id"]))]
    # Runs admitted in one transaction share admitted_at: within it, oldest first too.
    order = sorted(rows, key=lambda r: (r["admitted_at"], r["created_at"], r["id"]))
    by_admitted = [r["id"] for r in order]
    assert by_admitted == by_created


async def test_an_admission_that_waited_for_the_queue_lock_is_stamped_after_the_slot_freed(
    start: Start,
) -> None:
    """An admitter whose transaction began before the lock was free admits into the slot of a
    run that ended while it waited; its admitted_at must not precede that run's ended_at (it
    did when admitted_at was the transaction's start, and the slot history showed an overlap
    the queue never had)."""
    app = _app()
    async with start(app, Admission(queues={"reports": 1}), workers=0) as rt:  # we admit
        first = await rt.ops.start("report")
        second = await rt.ops.start("report")
        assert await admit(rt.pool, "reports", 1) == [first.execution.id]
        async with rt.pool.acquire() as holder, holder.transaction():
            await holder.execute(Q["lock_queue"], "reports")
            blocked = asyncio.create_task(admit(rt.pool, "reports", 1))
            await until(lambda: waiting_on_a_lock(rt.pool), what="the admitter at the lock")
            await rt.ops.terminate(first.execution.id, reason="frees the slot")  # ends it now
        assert await asyncio.wait_for(blocked, 10) == [second.execution.id]
        ended = (await rt.ops.get(first.execution.id)).current.ended_at
        admitted = (await rt.ops.get(second.execution.id)).current.admitted_at
    assert ended is not None and admitted is not None and admitted >= ended


async def test_max_active_runs_is_a_queue_of_its_own(start: Start) -> None:
    """`max_active_runs=1`: the second and third runs wait until the first ends (Dagu's
    maxActiveRuns); a workflow without a queue is not held back."""
    app = _app()
    async with start(app, Admission(), workers=2) as rt:
        first, second, third = [await rt.ops.start("deploy") for _ in range(3)]
        free = await rt.ops.start("plain")
        assert first.execution.queue == implicit_queue("deploy") and free.execution.queue is None
        await rt.ops.wait_until(first.execution.id, lambda r: r.status == "waiting", timeout=10)
        await rt.ops.wait_until(free.execution.id, lambda r: r.status == "waiting", timeout=10)
        assert (await rt.ops.get(second.execution.id)).current.queued
        for run in (first, second, third):
            await rt.ops.wait_until(run.execution.id, lambda r: r.status == "waiting", timeout=10)
            assert await _holding(rt.pool, implicit_queue("deploy")) == 1
            await rt.ops.signal(run.execution.id, "go", "ok")
            await rt.ops.wait_for_end(run.execution.id, timeout=10)
        rows = await rt.pool.fetch(
            "SELECT admitted_at, ended_at FROM executions WHERE workflow = 'deploy'"
        )
    assert max_overlap([(r["admitted_at"], r["ended_at"]) for r in rows]) == 1


async def test_cancelling_a_queued_run_ends_it_without_running_it(start: Start) -> None:
    """A queued run that is cancelled ends `cancelled` at once and never takes a slot."""
    app = _app()
    async with start(app, Admission(queues={"reports": 1}), workers=1) as rt:
        first = await rt.ops.start("report")
        queued = await rt.ops.start("report")
        await rt.ops.wait_until(first.execution.id, lambda r: r.status == "waiting", timeout=10)
        row = await rt.ops.cancel(queued.execution.id, reason="not needed")
        assert row.status == "cancelled" and row.admitted_at is None and row.attempt == 0
        await rt.ops.signal(first.execution.id, "go", "ok")
        assert (await rt.ops.wait_for_end(first.execution.id, timeout=10)).current.status == (
            "completed"
        )


async def test_a_start_on_an_unconfigured_queue_is_not_found_and_stores_nothing(
    start: Start,
) -> None:
    """A queue must be configured (TETHER_QUEUES) — by the workflow or by the start."""
    app = _app()
    async with start(app, Admission(), workers=0) as rt:
        with pytest.raises(errors.QueueNotFound):
            await rt.ops.start("report")
        with pytest.raises(errors.QueueNotFound):
            await rt.ops.start("plain", queue="nope")
        assert await rt.pool.fetchval("SELECT count(*) FROM executions") == 0


async def test_a_start_may_put_a_run_on_another_queue(start: Start) -> None:
    """`queue=` overrides the workflow's queue (Dagu's enqueue `queue`)."""
    app = _app()
    async with start(app, Admission(queues={"reports": 1, "bulk": 3}), workers=0) as rt:
        run = await rt.ops.start("plain", queue="bulk")
    assert run.execution.queue == "bulk" and run.execution.queued


async def test_a_workflows_own_name_as_queue_is_its_own_queue(start: Start) -> None:
    """`queue=<the workflow's name>` (Dagu: a DAG's default queue is named after it) is the
    workflow's own queue: a configured queue of that name, else the workflow's default."""
    app = _app()
    queues = {"reports": 1, "deploy": 2}
    async with start(app, Admission(queues=queues), workers=0) as rt:
        plain = (await rt.ops.start("plain", queue="plain")).execution
        report = (await rt.ops.start("report", queue="report")).execution
        deploy = (await rt.ops.start("deploy", queue="deploy")).execution
        with pytest.raises(errors.QueueNotFound):
            await rt.ops.start("plain", queue="report")
    assert (plain.queue, plain.queued) == (None, False)
    assert (report.queue, report.queued) == ("reports", True)
    assert (deploy.queue, deploy.queued) == ("deploy", True)  # configured: that queue
