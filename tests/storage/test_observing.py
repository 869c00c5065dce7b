"""The observability reads against a real database: status counts, queue backlogs, the
stored trace context, and whether migrations are current."""

from __future__ import annotations

import asyncpg
import pytest

from tether.storage import observing, repo

pytestmark = pytest.mark.postgres

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def test_counts_backlogs_and_trace_context_follow_the_rows(db: asyncpg.Pool) -> None:
    """A pending run is counted and runnable; once claimed it is running and leaves
    the backlog; a queued run is in its queue's backlog; the created event keeps the
    traceparent it was given, which a traced claim brings along."""
    assert await observing.status_counts(db) == {}
    assert await observing.queue_backlog(db) == []
    assert await observing.migrations_current(db) is True
    await repo.insert_execution(
        db, repo.NewExecution("ex_a", "wf", "ex_a", None, created_data={"traceparent": TRACEPARENT})
    )
    await repo.insert_execution(db, repo.NewExecution("ex_b", "wf", "ex_b", None, queue="slow"))
    assert await observing.status_counts(db) == {"pending": 2}
    backlog = {q: (depth, age) for q, depth, age in await observing.queue_backlog(db)}
    assert {q: depth for q, (depth, _) in backlog.items()} == {"": 1, "slow": 1}
    assert all(age >= 0 for _, age in backlog.values())
    (claimed,) = await repo.claim(db, "w1", 30.0, 10, traced=True)
    assert claimed.id == "ex_a"
    assert claimed.traceparent == TRACEPARENT  # read along by a traced claim
    assert await observing.status_counts(db) == {"pending": 1, "running": 1}
    assert [q for q, _, _ in await observing.queue_backlog(db)] == ["slow"]


async def test_only_a_traced_claim_reads_the_trace_context(db: asyncpg.Pool) -> None:
    """An untraced claim leaves it out; a traced claim of a run started without one has
    none; a re-claim (an expired lease: the recovery of a killed worker) still has it."""
    created = {"traceparent": TRACEPARENT}
    await repo.insert_execution(db, repo.NewExecution("ex_a", "wf", "ex_a", None))
    await repo.insert_execution(
        db, repo.NewExecution("ex_c", "wf", "ex_c", None, created_data=created)
    )
    claimed = {r.id: r.traceparent for r in await repo.claim(db, "w1", 0.0, 10, traced=True)}
    assert claimed == {"ex_a": None, "ex_c": TRACEPARENT}
    await db.execute("UPDATE executions SET wake_at = now() - interval '1 second'")
    again = {r.id: r.traceparent for r in await repo.claim(db, "w2", 30.0, 10)}
    assert again == {"ex_a": None, "ex_c": None}  # untraced: not read
    await db.execute("UPDATE executions SET wake_at = now() - interval '1 second'")
    recovered = {r.id: r.traceparent for r in await repo.claim(db, "w3", 30.0, 10, traced=True)}
    assert recovered == {"ex_a": None, "ex_c": TRACEPARENT}


async def test_migrations_are_not_current_on_an_older_schema(db: asyncpg.Pool) -> None:
    """/readyz's migrations check: a schema missing the newest migration is not current."""
    newest = await db.fetchval("SELECT max(version) FROM schema_migrations")
    await db.execute("DELETE FROM schema_migrations WHERE version = $1", newest)
    assert await observing.migrations_current(db) is False
