"""Poison runs: a user's error never reads as losing the database, and a run whose worker
dies every time it runs it ends failed instead of being claimed forever."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from tether.runtime.context import Context
from tether.runtime.executor import execute
from tether.runtime.operations import Operations
from tether.runtime.policy import RetryPolicy
from tether.runtime.registry import App
from tether.storage import repo
from tether.storage.errors import LeaseLost
from tether.storage.queries import Q
from tether.storage.repo import Checkpoint

from .conftest import Start

pytestmark = pytest.mark.postgres

USER_ERRORS: tuple[type[Exception], ...] = (FileNotFoundError, TimeoutError, ConnectionRefusedError)


@pytest.mark.parametrize("error", USER_ERRORS, ids=lambda c: c.__name__)
async def test_a_user_error_in_a_transaction_step_fails_the_run_with_that_error(
    start: Start, error: type[Exception]
) -> None:
    """OSError and TimeoutError raised by user code are the user's, not a lost database: the
    effect rolls back and the run ends failed with the user's error (our choice)."""
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
    failed naming the user's error."""
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
    """The workflow's retry policy retries a run whose transaction step raised."""
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


GUARD = repo.Abandon(after=3, message="lost %s times")


async def _start_one(db: asyncpg.Pool) -> str:
    app = App()

    @app.workflow
    async def victim(ctx: Context) -> int:
        return 1

    return (await Operations(db, app).start("victim")).execution.id


async def test_a_claim_counts_lost_leases_and_abandons_the_run_at_the_limit(
    db: asyncpg.Pool,
) -> None:
    """Each claim of a run whose lease expired counts one lost lease; the claim that reaches
    the limit ends the run failed (with an `ended` event) instead of leasing it."""
    run_id = await _start_one(db)
    # lease_s=0: the lease expires at once, as if each worker died right after claiming.
    for expected in (0, 1, 2):
        (row,) = await repo.claim(db, "W", 0, 1, GUARD)
        assert (row.status, row.lost_leases, row.lease_owner) == ("running", expected, "W")
    (row,) = await repo.claim(db, "W", 0, 1, GUARD)
    assert row.status == "failed"
    assert row.error == {
        "kind": "abandoned",
        "type": "RunAbandoned",
        "message": "lost 3 times",
        "lost_leases": 3,
    }
    assert row.lease_owner is None and row.wake_at is None and row.ended_at is not None
    assert row.expires_at is None  # no retention configured: kept
    assert await repo.claim(db, "W", 0, 1, GUARD) == []
    history = await repo.get_history(db, run_id)
    assert [(h.event_id, h.type, h.data) for h in history[1:]] == [
        (2, "ended", {"status": "failed", "error": row.error})
    ]
    assert row.last_event_id == 2


async def test_a_fenced_write_from_the_last_lost_worker_is_refused_after_abandonment(
    db: asyncpg.Pool,
) -> None:
    """The abandoning claim moves the fence: a late write of the lost worker changes nothing."""
    run_id = await _start_one(db)
    guard = repo.Abandon(after=1)
    (first,) = await repo.claim(db, "W", 0, 1, guard)
    (ended,) = await repo.claim(db, "X", 0, 1, guard)
    assert ended.status == "failed"
    with pytest.raises(LeaseLost):
        await repo.checkpoint(
            db, run_id, "W", first.attempt, first.last_event_id, Checkpoint(status="completed")
        )
    assert (await repo.get_execution(db, run_id)) == ended


STEP = {"seq": 1, "kind": "step", "name": "a", "result": {"value": 1}, "done": True}


@pytest.mark.parametrize(
    ("checkpoint", "lost_after"),
    [
        (Checkpoint(records=[STEP]), 1),  # progress, then this lease is lost too
        (Checkpoint(status="pending", wake_at=datetime(2000, 1, 1, tzinfo=UTC)), 0),  # released
        (Checkpoint(set_details=True, details="still trying"), 2),  # a breadcrumb: no progress
    ],
    ids=["records-a-step", "parks", "sets-details"],
)
async def test_progress_between_lost_leases_resets_the_count(
    db: asyncpg.Pool, checkpoint: Checkpoint, lost_after: int
) -> None:
    """'In a row': after a run recorded a step or was released, lost leases count from zero
    again; a details breadcrumb is not progress (our choice)."""
    run_id = await _start_one(db)
    await repo.claim(db, "W", 0, 1, GUARD)
    (row,) = await repo.claim(db, "W", 0, 1, GUARD)
    assert row.lost_leases == 1
    await repo.checkpoint(db, run_id, "W", row.attempt, row.last_event_id, checkpoint)
    (row,) = await repo.claim(db, "W", 0, 1, GUARD)
    assert (row.status, row.lost_leases) == ("running", lost_after)


@pytest.mark.parametrize("traced", [False, True])
async def test_the_claim_still_uses_the_partial_wake_index(db: asyncpg.Pool, traced: bool) -> None:
    """The claim's hot path stays one statement whose due-run scan uses executions_wake (a
    table of mostly ended runs, as in production), also when it reads the trace context."""
    await db.execute(
        "INSERT INTO executions (id, workflow, business_id, status, root_id, wake_at)"
        " SELECT 'ex_' || g, 'w', 'b' || g, CASE WHEN g % 100 = 0 THEN 'pending' ELSE"
        " 'completed' END, 'ex_' || g, CASE WHEN g % 100 = 0 THEN now() END"
        " FROM generate_series(1, 20000) AS g"
    )
    await db.execute("ANALYZE executions")
    plan = await db.fetchval(
        "EXPLAIN (FORMAT JSON) " + Q["claim_executions"], "W", 30.0, 16, 10, {}, "%s", traced
    )
    scans = [
        (node["Node Type"], node.get("Index Name"))
        for node in _nodes(plan[0]["Plan"])
        if node.get("Relation Name") == "executions"
    ]
    assert ("Index Scan", "executions_wake") in scans, scans
    assert "Seq Scan" not in {kind for kind, _ in scans}, scans


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)
