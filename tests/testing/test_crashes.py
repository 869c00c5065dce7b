"""Simulated crashes in WorkflowEnvironment: the worker dies at a chosen step, the run is
resumed from its history, and completed steps do not run again (a step cut off after it ran
but before its record does)."""

from __future__ import annotations

from collections import Counter

import pytest

import tether
from tether.runtime.worker import WorkerSettings
from tether.testing import WorkflowEnvironment

pytestmark = pytest.mark.postgres


def three_steps(calls: Counter[str]) -> tether.App:
    app = tether.App()

    def step(name: str) -> str:
        calls[name] += 1
        return name

    @app.workflow
    async def chain(ctx: tether.Context) -> str:
        a: str = await ctx.step(step, "a", name="a")
        b: str = await ctx.step(step, "b", name="b")
        c: str = await ctx.step(step, "c", name="c")
        return a + b + c

    return app


async def test_a_crash_before_a_step_resumes_without_rerunning_the_completed_ones() -> None:
    """The worker dies as the run reaches b: a is replayed from its record, b and c run
    once, and the run was claimed twice."""
    calls: Counter[str] = Counter()
    async with WorkflowEnvironment(three_steps(calls)) as env:
        crash = env.crash_at("b")
        run = await env.start("chain")
        assert await env.result(run) == "abc"
        info = await env.run(run)
    assert calls == {"a": 1, "b": 1, "c": 1}
    assert crash.count == 1 and crash.hits[0].execution_id == run
    assert crash.hits[0].attempt == 1 and info.attempt == 2


async def test_a_crash_after_a_step_ran_runs_that_step_again() -> None:
    """The worker dies after b returned but before its record: b runs again on replay (a
    plain step runs at least once), a does not."""
    calls: Counter[str] = Counter()
    async with WorkflowEnvironment(three_steps(calls)) as env:
        env.crash_at("b", when="after")
        run = await env.start("chain")
        assert await env.result(run) == "abc"
    assert calls == {"a": 1, "b": 2, "c": 1}


async def test_a_crash_fires_as_many_times_as_asked_and_only_for_its_workflow() -> None:
    """times=2 kills two claims in a row; a crash for another workflow never fires."""
    calls: Counter[str] = Counter()
    async with WorkflowEnvironment(three_steps(calls)) as env:
        twice = env.crash_at("c", times=2)
        never = env.crash_at("a", workflow="another")
        run = await env.start("chain")
        assert await env.result(run) == "abc"
        assert (await env.run(run)).attempt == 3
    assert twice.count == 2 and never.count == 0
    assert calls == {"a": 1, "b": 1, "c": 1}


async def test_without_time_skipping_a_crashed_run_waits_for_its_lease() -> None:
    """With time passing normally the crashed run is resumed once its (short) lease has
    expired in wall-clock time."""
    calls: Counter[str] = Counter()
    fast = WorkerSettings(concurrency=4, lease_s=0.5, poll_s=0.05, shutdown_grace_s=1.0)
    async with WorkflowEnvironment(
        three_steps(calls), time_skipping=False, worker_settings=fast
    ) as env:
        env.crash_at("b")
        run = await env.start("chain")
        assert await env.result(run) == "abc"
    assert calls == {"a": 1, "b": 1, "c": 1}
