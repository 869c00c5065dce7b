"""A start hands its run to a worker of its own process with a free slot: the run is inserted
already claimed by that worker (no wake-up, no claim statement), its lease as real as a claim's
(operations/starting.py, `_insert_taken`)."""

from __future__ import annotations

import asyncio

import pytest

from tether.runtime.admission import Admission
from tether.runtime.context import Context
from tether.runtime.ids import new_execution_id
from tether.runtime.registry import App
from tether.runtime.worker import WorkerSettings
from tether.storage import repo

from .conftest import FAST, Start

pytestmark = pytest.mark.postgres


def _app(gate: asyncio.Event | None = None, entered: asyncio.Event | None = None) -> App:
    app = App()

    @app.workflow
    async def hello(ctx: Context) -> str:
        return "hi"

    @app.workflow
    async def blocks(ctx: Context) -> str:
        async def held() -> str:
            assert gate is not None
            if entered is not None:
                entered.set()
            await gate.wait()
            return "released"

        value: str = await ctx.step(held, name="held")
        return value

    return app


async def test_a_start_hands_its_run_to_a_local_worker_already_claimed(start: Start) -> None:
    """The row the start returns is already leased to this process's worker (attempt 1, a
    real lease: wake_at = lease_until), and that worker runs it to the end without claiming."""
    async with start(_app()) as rt:
        worker = rt.workers[0]
        started = await rt.ops.start("hello")
        row = started.execution
        assert (row.status, row.lease_owner, row.attempt) == ("running", worker.owner, 1)
        assert row.lease_until is not None and row.wake_at == row.lease_until
        view = await rt.ops.wait_for_end(row.id, timeout=10)
        history = [e.type for e in await repo.get_history(rt.pool, row.id)]
    assert (view.current.status, view.current.output, view.current.attempt) == (
        "completed",
        "hi",
        1,
    )
    assert worker.stats.claimed == 1 and worker._reserved == 0
    assert history[0] == "created"


async def test_a_queued_start_or_a_full_worker_is_not_handed_over(start: Start) -> None:
    """Admission is untouched: a run on a queue is inserted queued (its queue admits it), and
    a worker without a free slot takes nothing (the run is pending for any worker's claim)."""
    gate = asyncio.Event()
    one = WorkerSettings(concurrency=1, lease_s=5.0, poll_s=0.05, shutdown_grace_s=1.0)
    async with start(_app(gate), worker_settings=one) as rt:
        first = await rt.ops.start("blocks")
        assert first.execution.status == "running"  # the free slot took it
        second = await rt.ops.start("hello")
        assert (second.execution.status, second.execution.lease_owner) == ("pending", None)
        gate.set()
        view = await rt.ops.wait_for_end(second.execution.id, timeout=10)
        assert view.current.status == "completed"  # claimed by the loop once the slot freed
    queued = WorkerSettings(
        concurrency=4,
        lease_s=5.0,
        poll_s=0.05,
        shutdown_grace_s=1.0,
        admission=Admission(queues={"reports": 1}),
    )
    async with start(_app(), worker_settings=queued) as rt:
        run = (await rt.ops.start("hello", queue="reports")).execution
        assert (run.status, run.queued, run.lease_owner) == ("pending", True, None)
        plain = (await rt.ops.start("hello")).execution
        assert plain.status == "pending"  # a worker that admits queues claims only in its loop
        for handle in (run.id, plain.id):
            assert (await rt.ops.wait_for_end(handle, timeout=10)).current.status == "completed"


async def test_a_run_handed_to_a_worker_that_never_takes_it_is_recovered_at_lease_expiry(
    start: Start, db_url: str
) -> None:
    """The crash case: the insert committed under a lease whose worker is gone (never
    adopted). Nothing runs it until the lease expires; then any worker claims it, as a run
    whose worker was lost (one lost lease), and it completes."""
    async with start(_app(), workers=0) as rt:
        new = repo.NewExecution(
            id=new_execution_id(), workflow="hello", business_id="b", input=None
        )
        rows = await repo.insert_claimed(rt.pool, new, repo.Lease("gone-worker", 0.5))
        assert rows is not None and rows[0].lease_owner == "gone-worker"
    async with start(_app(), worker_settings=FAST) as rt:
        view = await rt.ops.wait_for_end(new.id, timeout=10)
    assert (view.current.status, view.current.attempt, view.current.lost_leases) == (
        "completed",
        2,
        0,  # progress since: the count of lost leases in a row starts over
    )


async def test_a_handed_over_run_costs_no_claim_statement(
    start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hand-over replaces the wake-up and the claim: while the handed run runs, the
    worker's claim loop (polling only every 30 s) sends no claim statement."""
    gate, entered = asyncio.Event(), asyncio.Event()
    idle = WorkerSettings(concurrency=4, lease_s=5.0, poll_s=30.0, shutdown_grace_s=1.0)
    claims: list[str] = []
    claimed = asyncio.Event()
    claim = repo.claim

    async def counted(*args: object, **kwargs: object) -> object:
        claims.append("claim")
        try:
            return await claim(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            claimed.set()

    async with start(_app(gate, entered), worker_settings=idle) as rt:
        # Settle the loop: woken now, its next claim is counted; once that claim returns, the
        # loop sleeps (its earlier wake-ups, at start-up and the listener's, are spent).
        monkeypatch.setattr(repo, "claim", counted)
        rt.workers[0]._poke()
        await asyncio.wait_for(claimed.wait(), 10)
        claims.clear()
        run = (await rt.ops.start("blocks")).execution
        # A claim of the run would come before its step runs: the step running is the event.
        await asyncio.wait_for(entered.wait(), 10)
        assert (run.status, claims) == ("running", [])
        gate.set()
        view = await rt.ops.wait_for_end(run.id, timeout=10)
    assert view.current.output == "released"
