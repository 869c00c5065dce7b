"""Replay, steps, timers, retries, timeouts and continue-as-new on a real PostgreSQL."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from tests.waiting import until
from tether.runtime import errors
from tether.runtime.context import Context
from tether.runtime.executor import execute
from tether.runtime.operations import Operations, StartRequest
from tether.runtime.policy import RetryPolicy
from tether.runtime.registry import App
from tether.runtime.worker import Worker, WorkerSettings
from tether.storage import repo
from tether.storage.queries import Q

from .conftest import Start

pytestmark = pytest.mark.postgres


class Num(BaseModel):
    n: int


async def test_three_steps_run_once_each_and_the_output_is_stored(start: Start) -> None:
    """Each step runs once and the run completes with the typed output."""
    app = App()
    calls: Counter[str] = Counter()

    def add(name: str, x: int) -> int:
        calls[name] += 1
        return x + 1

    @app.workflow
    async def three(ctx: Context, inp: Num) -> Num:
        a = await ctx.step(add, "a", inp.n)
        b = await ctx.step(add, "b", a)
        c = await ctx.step(add, "c", b)
        return Num(n=c)

    async with start(app) as rt:
        started = await rt.ops.start("three", {"n": 1})
        view = await rt.ops.wait_for_end(started.execution.id, timeout=10)
    assert view.current.status == "completed"
    assert view.current.output == {"n": 4}
    assert calls == {"a": 1, "b": 1, "c": 1}


async def test_a_crash_mid_run_resumes_without_rerunning_completed_steps(
    db: object, start: Start
) -> None:
    """A worker dies inside step 2 (its task is cancelled, nothing released); after its lease
    expires another worker replays: step 1 is not run again, step 2 is (DBOS-style check)."""
    app = App()
    calls: Counter[str] = Counter()
    inside_b = asyncio.Event()
    block = asyncio.Event()

    async def a() -> str:
        calls["a"] += 1
        return "A"

    async def b() -> str:
        calls["b"] += 1
        if calls["b"] == 1:
            inside_b.set()
            await block.wait()  # the first worker never gets past this
        return "B"

    @app.workflow
    async def two(ctx: Context) -> str:
        both: str = await ctx.step(a) + await ctx.step(b)
        return both

    pool = db
    ops = Operations(pool, app)  # type: ignore[arg-type]
    started = await ops.start("two")
    (row,) = await repo.claim(pool, "dead-worker", 0.3, 1)  # type: ignore[arg-type]
    crashed = asyncio.create_task(execute(pool, app, row, "dead-worker"))  # type: ignore[arg-type]
    async with asyncio.timeout(5):
        await inside_b.wait()
    crashed.cancel()  # the process "dies": no release, no further write
    with pytest.raises(asyncio.CancelledError):
        await crashed
    async with start(app) as rt:
        view = await rt.ops.wait_for_end(started.execution.id, timeout=10)
    assert view.current.status == "completed"
    assert view.current.output == "AB"
    assert calls == {"a": 1, "b": 2}


async def test_a_fenced_write_from_a_worker_that_lost_its_lease_is_refused(db: object) -> None:
    """Worker A's lease expires and B claims the run: A's late writes change nothing."""
    app = App()

    @app.workflow
    async def noop(ctx: Context) -> int:
        return 1

    pool = db
    ops = Operations(pool, app)  # type: ignore[arg-type]
    started = await ops.start("noop")
    (row_a,) = await repo.claim(pool, "A", 0.05, 1)  # type: ignore[arg-type]
    # A lease expiry has no event: B's claim is retried until it takes the run.
    rows = await until(lambda: repo.claim(pool, "B", 30, 1), timeout=5, what="B's claim")  # type: ignore[arg-type]
    assert rows[0].attempt == row_a.attempt + 1
    assert await execute(pool, app, row_a, "A") == "lost"  # type: ignore[arg-type]
    current = (await ops.get(started.execution.id)).current
    assert current.status == "running" and current.lease_owner == "B"
    assert await execute(pool, app, rows[0], "B") == "completed"  # type: ignore[arg-type]


async def test_durable_sleep_parks_the_run_and_wakes_it(start: Start) -> None:
    """ctx.sleep parks with wake_at; a worker resumes it after the time has come."""
    app = App()

    @app.workflow
    async def napper(ctx: Context) -> str:
        before = await ctx.now()
        await ctx.sleep(0.3)
        after = await ctx.now()
        return "slept" if after - before >= timedelta(seconds=0.3) else "early"

    async with start(app) as rt:
        started = await rt.ops.start("napper")
        parked = await rt.ops.wait_until(
            started.execution.id, lambda r: r.status in ("waiting", "completed"), timeout=5
        )
        view = await rt.ops.wait_for_end(started.execution.id, timeout=10)
    assert parked.current.status in ("waiting", "completed")
    assert view.current.output == "slept"


async def test_now_and_uuid_are_recorded_and_replayed(start: Start) -> None:
    """ctx.now/ctx.uuid return the recorded values when the run replays after a park."""
    app = App()
    seen: list[tuple[str, str]] = []

    @app.workflow
    async def det(ctx: Context) -> list[str]:
        u = await ctx.uuid()
        t = await ctx.now()
        seen.append((str(u), t.isoformat()))
        await ctx.sleep(0.05)  # a durable timer parks the run: it replays to go on
        return [str(u), t.isoformat()]

    async with start(app) as rt:
        started = await rt.ops.start("det")
        view = await rt.ops.wait_for_end(started.execution.id, timeout=10)
    assert len(seen) >= 2 and len(set(seen)) == 1
    assert view.current.output == list(seen[0])


async def test_a_failing_step_is_retried_durably_then_raises_step_failed(start: Start) -> None:
    """Retries park the run with backoff; after the last try StepFailed reaches the workflow."""
    app = App()
    tries: Counter[str] = Counter()
    caught: list[errors.StepFailed] = []

    def flaky() -> int:
        tries["flaky"] += 1
        raise ConnectionError("down")

    @app.workflow
    async def caller(ctx: Context) -> str:
        try:
            await ctx.step(flaky, retry=RetryPolicy(max_attempts=3, initial_interval=0.01))
        except errors.StepFailed as exc:
            caught.append(exc)
            return f"gave up: {exc.type}"
        return "impossible"

    async with start(app) as rt:
        started = await rt.ops.start("caller")
        view = await rt.ops.wait_for_end(started.execution.id, timeout=10)
    assert view.current.output == "gave up: ConnectionError"
    assert tries["flaky"] == 3
    assert caught[-1].error_message == "down"


async def test_run_level_retry_reruns_the_failed_step_but_not_earlier_ones(start: Start) -> None:
    """A workflow-level RetryPolicy re-executes from the first failed call; earlier steps are
    replayed from their records."""
    app = App()
    tries: Counter[str] = Counter()

    def first() -> int:
        tries["first"] += 1
        return 1

    def second() -> int:
        tries["second"] += 1
        if tries["second"] < 2:
            raise RuntimeError("transient")
        return 2

    @app.workflow(retry=RetryPolicy(max_attempts=2, initial_interval=0.01))
    async def wf(ctx: Context) -> int:
        total: int = await ctx.step(first) + await ctx.step(second)
        return total

    async with start(app) as rt:
        started = await rt.ops.start("wf")
        view = await rt.ops.wait_for_end(started.execution.id, timeout=10)
    assert view.current.status == "completed" and view.current.output == 3
    assert tries == {"first": 1, "second": 2}
    assert view.current.run_attempt == 2


async def test_an_uncaught_workflow_error_fails_the_run_with_its_type(start: Start) -> None:
    """No retry left: status failed, error kind 'workflow' with the type and message."""
    app = App()

    @app.workflow
    async def boom(ctx: Context) -> None:
        raise ValueError("bad thing")

    async with start(app) as rt:
        started = await rt.ops.start("boom")
        view = await rt.ops.wait_for_end(started.execution.id, timeout=10)
    assert view.current.status == "failed"
    assert view.current.error == {"kind": "workflow", "type": "ValueError", "message": "bad thing"}


async def test_protocol_error_is_recorded_with_code(start: Start) -> None:
    """raise ProtocolError(code, message) ends the run failed with kind 'protocol'."""
    app = App()

    @app.workflow
    async def proto(ctx: Context) -> None:
        raise errors.ProtocolError(-32003, "quota exceeded", {"limit": 3})

    async with start(app) as rt:
        started = await rt.ops.start("proto")
        view = await rt.ops.wait_for_end(started.execution.id, timeout=10)
    err = view.current.error
    assert view.current.status == "failed"
    assert (err["kind"], err["code"], err["message"], err["data"]) == (
        "protocol",
        -32003,
        "quota exceeded",
        {"limit": 3},
    )


async def test_workflow_timeout_ends_the_run_timed_out(start: Start) -> None:
    """A workflow timeout ends a parked run as timed_out when the deadline passes."""
    app = App()

    @app.workflow(timeout=0.3)
    async def slow(ctx: Context) -> None:
        await ctx.wait_for_signal("never")

    async with start(app) as rt:
        started = await rt.ops.start("slow")
        view = await rt.ops.wait_for_end(started.execution.id, timeout=10)
    assert view.current.status == "timed_out"


async def test_continue_as_new_chain_is_followed_by_get(start: Start) -> None:
    """Each run continues as new until n reaches 3; every handle resolves to the last run."""
    app = App()

    @app.workflow
    async def counter(ctx: Context, inp: Num) -> int:
        if inp.n < 3:
            ctx.continue_as_new(Num(n=inp.n + 1))
        return inp.n

    async with start(app) as rt:
        first = await rt.ops.start("counter", {"n": 0}, business_id="biz-1")
        view = await rt.ops.wait_until(
            first.execution.id, lambda r: r.status == "completed", timeout=10
        )
    assert view.requested.status == "continued_as_new"
    assert view.current.output == 3
    assert [r.input for r in view.chain] == [{"n": 0}, {"n": 1}, {"n": 2}, {"n": 3}]
    assert {r.business_id for r in view.chain} == {"biz-1"}
    assert {r.root_id for r in view.chain} == {first.execution.id}


async def test_replay_that_meets_a_different_step_fails_as_nondeterministic(start: Start) -> None:
    """Changed workflow code that no longer matches the records fails the run visibly."""
    app = App()
    flip = {"name": "one"}

    async def work() -> int:
        return 1

    @app.workflow
    async def changing(ctx: Context) -> int:
        await ctx.step(work, name=flip["name"])
        flip["name"] = "two"
        await ctx.sleep(0.01)  # a durable timer parks the run: it replays to go on
        return 0

    async with start(app) as rt:
        started = await rt.ops.start("changing")
        view = await rt.ops.wait_for_end(started.execution.id, timeout=10)
    assert view.current.status == "failed"
    assert view.current.error["kind"] == "nondeterminism"


async def test_graceful_worker_stop_gives_leases_back(db: object) -> None:
    """Stopping a worker mid-step releases the lease at once (pending, no owner)."""
    app = App()
    entered = asyncio.Event()

    async def forever() -> None:
        entered.set()
        await asyncio.Event().wait()

    @app.workflow
    async def stuck(ctx: Context) -> None:
        await ctx.step(forever)

    pool = db
    ops = Operations(pool, app)  # type: ignore[arg-type]
    started = await ops.start("stuck")
    worker = Worker(pool, app, WorkerSettings(poll_s=0.05, shutdown_grace_s=0.1))  # type: ignore[arg-type]
    task = asyncio.create_task(worker.run())
    async with asyncio.timeout(5):
        await entered.wait()
    worker.stop()
    async with asyncio.timeout(5):
        await task
    row = (await ops.get(started.execution.id)).current
    assert (row.status, row.lease_owner) == ("pending", None)


class _ClaimCounter:
    """The test's pool, counting the claim loop's own claim statements."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self.claims = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    async def fetch(self, query: str, *args: Any, **kwargs: Any) -> Any:
        self.claims += query == Q["claim_executions"]
        return await self._pool.fetch(query, *args, **kwargs)


async def test_runs_claimed_with_settles_keep_the_worker_within_its_concurrency(
    db: object,
) -> None:
    """Each settle claims the run that takes its slot (Refill): the claim loop itself claims
    only at the start and once the queue runs dry, and no more runs than `concurrency` ever
    run at once."""
    app = App()
    running: list[str] = []
    most = 0

    async def pause() -> None:
        await asyncio.sleep(0.01)  # work that takes a moment, so that runs overlap

    @app.workflow
    async def short(ctx: Context) -> None:
        nonlocal most
        running.append(ctx.execution_id)
        most = max(most, len(running))
        await ctx.step(pause)
        running.remove(ctx.execution_id)

    pool = _ClaimCounter(db)
    ops = Operations(pool, app)
    outcomes = await ops.start_many([StartRequest("short", None) for _ in range(12)])
    # No polling: the claim loop claims only when started and when a run ends with a slot free.
    settings = WorkerSettings(concurrency=2, poll_s=30.0, shutdown_grace_s=1.0)
    worker = Worker(pool, app, settings)
    task = asyncio.create_task(worker.run())
    try:
        for outcome in outcomes:
            assert not isinstance(outcome, Exception)
            view = await ops.wait_for_end(outcome.execution.id, timeout=10)
            assert view.current.status == "completed"
    finally:
        worker.stop()
        await task
    assert most == 2
    assert worker.stats.claimed == 12
    assert pool.claims <= 4, pool.claims  # without refills: one claim per settle, 11 or more


class _HeldSettle:
    """The test's pool; the first checkpoint statement that settles a run waits for `go`
    (the worker's checkpoint writer sends it on a connection it took: `await acquire()`)."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self.held = asyncio.Event()
        self.go = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    def acquire(self) -> Any:
        return _HeldAcquire(self, self._pool.acquire())

    async def release(self, conn: Any) -> None:
        await self._pool.release(conn.conn if isinstance(conn, _HeldConnection) else conn)


class _HeldAcquire:
    """`await pool.acquire()` gives a connection whose statements `_HeldSettle` sees;
    `async with pool.acquire()` the pool's own."""

    def __init__(self, held: _HeldSettle, inner: Any) -> None:
        self.held = held
        self.inner = inner

    def __await__(self) -> Any:
        conn = yield from self.inner.__await__()
        return _HeldConnection(self.held, conn)

    async def __aenter__(self) -> Any:
        return await self.inner.__aenter__()

    async def __aexit__(self, *exc: object) -> Any:
        return await self.inner.__aexit__(*exc)


class _HeldConnection:
    def __init__(self, held: _HeldSettle, conn: Any) -> None:
        self.held = held
        self.conn = conn

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)

    async def fetch(self, query: str, *args: Any, **kwargs: Any) -> Any:
        status = args[8] if query in (Q["checkpoint_many"], Q["checkpoint_one"]) else None
        settles = any(status) if isinstance(status, list) else status is not None
        if settles and not self.held.held.is_set():
            self.held.held.set()
            await self.held.go.wait()
        return await self.conn.fetch(query, *args, **kwargs)


async def test_a_run_refilled_while_the_worker_stops_is_given_back(db: object) -> None:
    """A settle sent before stop() claims the next run; once committed, that run is drained
    with the others: its lease handed back (pending, no owner), not left to expire."""
    app = App()

    async def hold(fast: bool) -> None:
        if not fast:
            await asyncio.sleep(30)  # long work: the worker's stop cuts it short

    @app.workflow
    async def one(ctx: Context, fast: bool) -> None:
        await ctx.step(hold, fast)

    pool = _HeldSettle(db)
    ops = Operations(pool, app)
    first = await ops.start("one", True)
    second = await ops.start("one", False)
    settings = WorkerSettings(concurrency=1, poll_s=30.0, shutdown_grace_s=0.2)
    worker = Worker(pool, app, settings)
    task = asyncio.create_task(worker.run())
    async with asyncio.timeout(10):
        await pool.held.wait()  # the first run's settle, claiming one run, is in flight
        worker.stop()
        pool.go.set()
        await task
    assert (await ops.get(first.execution.id)).current.status == "completed"
    row = (await ops.get(second.execution.id)).current
    assert (row.status, row.lease_owner, row.attempt) == ("pending", None, 1)
