"""Poison runs: a user's error never reads as losing the database, and a run whose worker
dies every time it runs it ends failed instead of being claimed forever (issue 9)."""

from __future__ import annotations

from collections import Counter

import asyncpg
import pytest

from tether.runtime.context import Context
from tether.runtime.executor import execute
from tether.runtime.operations import Operations
from tether.runtime.policy import RetryPolicy
from tether.runtime.registry import App
from tether.storage import repo

from .conftest import Start

pytestmark = pytest.mark.postgres

USER_ERRORS: tuple[type[Exception], ...] = (FileNotFoundError, TimeoutError, ConnectionRefusedError)


@pytest.mark.parametrize("error", USER_ERRORS, ids=lambda c: c.__name__)
async def test_a_user_error_in_a_transaction_step_fails_the_run_with_that_error(
    start: Start, error: type[Exception]
) -> None:
    """OSError and TimeoutError raised by user code are the user's, not a lost database: the
    effect rolls back and the run ends failed with the user's error (issue 9; our choice)."""
    app = App()
    tries: Counter[str] = Counter()

    async def effect(conn: asyncpg.Connection) -> int:
        tries["effect"] += 1
        await conn.execute("CREATE TABLE IF NOT EXISTS poison_effects (n int)")
        await conn.execute("INSERT INTO poison_effects VALUES (1)")
        raise error("user said no")

    @app.workflow
    async def writes(ctx: Context) -> int:
        value: int = await ctx.transaction(effect, name="effect")
        return value

    async with start(app) as rt:
        started = await rt.ops.start("writes")
        view = await rt.ops.wait_for_end(started.execution.id, timeout=10)
        effects = await rt.pool.fetchval("SELECT to_regclass('poison_effects') IS NOT NULL")
    run = view.current
    assert run.status == "failed", (run.status, run.error, run.attempt)
    assert run.error == {"kind": "workflow", "type": error.__name__, "message": "user said no"}
    assert run.attempt == 1  # claimed once: never lost, never re-claimed
    assert tries["effect"] == 1
    assert effects is False  # the effect rolled back with the failed step


@pytest.mark.parametrize("error", USER_ERRORS, ids=lambda c: c.__name__)
async def test_a_user_error_in_a_plain_step_fails_the_run_after_its_retries(
    start: Start, error: type[Exception]
) -> None:
    """A plain step raising OSError/TimeoutError is retried per its policy, then the run ends
    failed naming the user's error (issue 9)."""
    app = App()
    tries: Counter[str] = Counter()

    def flaky() -> int:
        tries["flaky"] += 1
        raise error("still broken")

    @app.workflow
    async def calls(ctx: Context) -> int:
        policy = RetryPolicy(max_attempts=2, initial_interval=0.0)
        value: int = await ctx.step(flaky, name="flaky", retry=policy)
        return value

    async with start(app) as rt:
        started = await rt.ops.start("calls")
        view = await rt.ops.wait_for_end(started.execution.id, timeout=10)
        steps = await repo.get_steps(rt.pool, started.execution.id)
    run = view.current
    assert run.status == "failed", (run.status, run.error)
    assert run.error["type"] == "StepFailed"
    assert run.error["message"] == f"step 'flaky' failed: {error.__name__}: still broken"
    assert tries["flaky"] == 2
    assert [(s.name, s.result["error"]["type"], s.done) for s in steps] == [
        ("flaky", error.__name__, True)
    ]


@pytest.mark.parametrize("error", USER_ERRORS, ids=lambda c: c.__name__)
async def test_a_user_error_in_a_transaction_step_is_retried_by_the_workflow_policy(
    start: Start, error: type[Exception]
) -> None:
    """The workflow's retry policy retries a run whose transaction step raised (issue 9)."""
    app = App()
    tries: Counter[str] = Counter()

    async def effect(conn: asyncpg.Connection) -> int:
        tries["effect"] += 1
        if tries["effect"] < 3:
            raise error("not yet")
        return int(await conn.fetchval("SELECT 7"))

    @app.workflow(retry=RetryPolicy(max_attempts=3, initial_interval=0.0))
    async def patient(ctx: Context) -> int:
        value: int = await ctx.transaction(effect, name="effect")
        return value

    async with start(app) as rt:
        started = await rt.ops.start("patient")
        view = await rt.ops.wait_for_end(started.execution.id, timeout=10)
    assert view.current.status == "completed", view.current.error
    assert view.current.output == 7
    assert tries["effect"] == 3


async def test_a_connection_that_breaks_under_a_transaction_step_reads_as_a_lost_lease(
    db: asyncpg.Pool,
) -> None:
    """Losing the database inside ctx.transaction is not the user's failure: the executor
    writes nothing and reports 'lost', so the lease expires and another worker resumes."""
    app = App()

    async def doomed(conn: asyncpg.Connection) -> int:
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        await db.execute("SELECT pg_terminate_backend($1)", pid)
        return int(await conn.fetchval("SELECT 1"))

    @app.workflow
    async def fragile(ctx: Context) -> int:
        value: int = await ctx.transaction(doomed, name="doomed")
        return value

    ops = Operations(db, app)
    started = await ops.start("fragile")
    (row,) = await repo.claim(db, "A", 30, 1)
    status = await execute(db, app, row, "A")
    assert status == "lost"
    current = (await ops.get(started.execution.id)).current
    assert current.status == "running" and current.lease_owner == "A"
    assert await repo.get_steps(db, started.execution.id) == []
