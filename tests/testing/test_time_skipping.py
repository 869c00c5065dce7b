"""Time skipping in WorkflowEnvironment: durable sleeps, wait deadlines, retry backoff and run
timeouts complete at once, in order, while nothing else can run, and the workflow's clock
sees the skipped time; without skipping the same runs do not finish."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

import pytest

import tether
from tether.runtime.skipping import SkippingClock
from tether.testing import RunFailed, WaitTimedOut, WorkflowEnvironment

pytestmark = pytest.mark.postgres

HOUR = timedelta(hours=1)


def napper_app() -> tether.App:
    app = tether.App()

    @app.workflow
    async def napper(ctx: tether.Context, hours: float) -> list[str]:
        before = await ctx.now()
        await ctx.sleep(timedelta(hours=hours))
        after = await ctx.now()
        return [before.isoformat(), after.isoformat()]

    return app


async def test_a_workflow_sleeping_an_hour_sees_the_hour_pass_at_once() -> None:
    """ctx.now() before and after ctx.sleep(1 h) is an hour apart, and the run completes
    within a wait of a few wall-clock seconds (our choice: the kit's core promise)."""
    async with WorkflowEnvironment(napper_app(), timeout=5) as env:
        began = env.now()
        run = await env.start("napper", 1.0)
        before, after = await env.result(run)
        assert env.now() - began >= HOUR
    assert datetime.fromisoformat(after) - datetime.fromisoformat(before) >= HOUR


async def test_without_time_skipping_the_same_sleep_outlasts_the_wait() -> None:
    """The same run with time passing normally is still asleep when the wait gives up: the
    test above passes only because time skips."""
    async with WorkflowEnvironment(napper_app(), time_skipping=False, timeout=1) as env:
        run = await env.start("napper", 1.0)
        with pytest.raises(WaitTimedOut, match="wakes at"):
            await env.result(run)
        assert (await env.run(run)).status == "waiting"


async def test_a_clock_that_does_not_skip_leaves_the_sleeper_asleep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the skipping clock's move made a no-op, the hour never passes and the wait times
    out: time skipping is what makes the first test pass."""

    async def stays(self: SkippingClock, db: object, by: timedelta) -> list[str]:
        return []

    monkeypatch.setattr(SkippingClock, "skip", stays)
    async with WorkflowEnvironment(napper_app(), timeout=1) as env:
        run = await env.start("napper", 1.0)
        with pytest.raises(WaitTimedOut):
            await env.result(run)


async def test_timers_of_several_runs_fire_in_the_order_of_their_times() -> None:
    """Runs sleeping 3 h, 1 h and 2 h wake one after another, earliest first: each wakes at
    its own time, not at the latest one."""
    async with WorkflowEnvironment(napper_app()) as env:
        runs = {hours: await env.start("napper", hours) for hours in (3.0, 1.0, 2.0)}
        woke = {h: datetime.fromisoformat((await env.result(r))[1]) for h, r in runs.items()}
        slept = {h: datetime.fromisoformat((await env.result(r))[0]) for h, r in runs.items()}
    assert sorted(woke, key=woke.__getitem__) == [1.0, 2.0, 3.0]
    for hours in runs:
        overslept = woke[hours] - slept[hours] - timedelta(hours=hours)
        assert timedelta(0) <= overslept < timedelta(minutes=1), (hours, overslept)


async def test_a_wait_deadline_passes_at_once() -> None:
    """A signal wait with a day's timeout times out (WaitTimeout in the workflow) as soon as
    the test waits for the result."""
    app = tether.App()

    @app.workflow
    async def patient(ctx: tether.Context) -> str:
        try:
            await ctx.wait_for_signal("go", timeout=timedelta(days=1))
        except tether.WaitTimeout:
            return "gave up"
        return "went"

    async with WorkflowEnvironment(app) as env:
        began = env.now()
        run = await env.start("patient")
        assert await env.result(run) == "gave up"
        assert env.now() - began >= timedelta(days=1)
        assert "wait_timed_out" in [e.type for e in await env.history(run)]


async def test_a_wait_with_a_deadline_is_answered_before_the_deadline_skips_by() -> None:
    """wait_until_waiting returns once the wait is open, before its deadline: the test can
    still answer it in time."""
    app = tether.App()

    @app.workflow
    async def gate(ctx: tether.Context) -> str:
        decision = await ctx.approval("ship", timeout=HOUR)
        assert isinstance(decision, tether.Approved)
        return "shipped"

    async with WorkflowEnvironment(app) as env:
        run = await env.start("gate")
        (ship,) = await env.wait_until_waiting(run, "ship")
        assert ship.deadline is not None and env.now() < ship.deadline
        await env.approve(run, "ship")
        assert await env.result(run) == "shipped"


async def test_retry_backoff_between_step_tries_is_skipped() -> None:
    """A step that fails twice with ten-minute backoff succeeds on its third try at once; the
    tries are at least the backoff apart on the workflow's clock."""
    app = tether.App()
    tries: list[datetime] = []

    def flaky() -> str:
        tries.append(env.now())
        if len(tries) < 3:
            raise ConnectionError("not yet")
        return "done"

    @app.workflow
    async def stubborn(ctx: tether.Context) -> str:
        policy = tether.RetryPolicy(max_attempts=3, initial_interval=600, max_interval=600)
        result: str = await ctx.step(flaky, retry=policy)
        return result

    async with WorkflowEnvironment(app) as env:
        run = await env.start("stubborn")
        assert await env.result(run) == "done"
    assert [b - a >= timedelta(minutes=10) for a, b in itertools.pairwise(tries)] == [True, True]


async def test_a_run_timeout_ends_a_sleeping_run_timed_out() -> None:
    """A workflow with a one-hour timeout that sleeps two hours ends timed_out at its
    deadline."""
    app = tether.App()

    @app.workflow(timeout=HOUR)
    async def late(ctx: tether.Context) -> str:
        await ctx.sleep(2 * HOUR)
        return "woke"

    async with WorkflowEnvironment(app) as env:
        began = env.now()
        run = await env.start("late")
        with pytest.raises(RunFailed) as failed:
            await env.result(run)
        assert failed.value.status == "timed_out"
        assert HOUR <= env.now() - began < 2 * HOUR


async def test_env_sleep_fires_the_timers_it_passes_and_no_later_one() -> None:
    """env.sleep(2 h) wakes the run sleeping 1 h (it completes) and leaves the one sleeping
    3 h asleep."""
    async with WorkflowEnvironment(napper_app()) as env:
        began = env.now()
        short = await env.start("napper", 1.0)
        long = await env.start("napper", 3.0)
        await env.sleep(2 * HOUR)
        assert env.now() - began >= 2 * HOUR
        assert await env.status(short) == "completed"
        assert await env.status(long) == "waiting"
