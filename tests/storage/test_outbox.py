"""The outbox's triggers (migration 0009) on a real PostgreSQL: a notification row is written
by the very transaction that opens, answers or expires a wait or ends a run, once per routed
channel and recipient, and never twice for one wait."""

from __future__ import annotations

import asyncpg
import pytest

from tether.storage import outbox, repo
from tether.storage.driver import Queryable
from tether.storage.outbox import Route

pytestmark = pytest.mark.postgres

ALL = ("wait.opened", "wait.answered", "wait.expired", "run.ended")
KINDS = ("signal", "approval", "human_task", "agent_step")


def wait(
    run: str, n: int, name: str = "publish", opened: str = "2026-01-01T00:00:00+00:00"
) -> dict[str, object]:
    return {
        "key": f"{run}:approval:{name}:{n}",
        "kind": "approval",
        "name": name,
        "prompt": "Ship it?",
        "opened_at": opened,
        "deadline": None,
        "inputs": ["ticket"],
        "required": ["ticket"],
    }


async def new_run(db: asyncpg.Pool, run: str, workflow: str = "deploy") -> None:
    await repo.insert_execution(db, repo.NewExecution(run, workflow, run, None))


async def park(conn: Queryable, run: str, waits: list[dict[str, object]]) -> None:
    await conn.execute(
        "UPDATE executions SET status = 'waiting', waits = $2::jsonb WHERE id = $1", run, waits
    )


async def rows(db: asyncpg.Pool) -> list[asyncpg.Record]:
    return await db.fetch("SELECT channel, recipient, event, subject, data FROM outbox ORDER BY id")


async def test_a_wait_opening_writes_a_row_per_routed_channel_in_its_own_transaction(
    db: asyncpg.Pool,
) -> None:
    """Our choice: the row is part of the park's transaction: rolled back with it, there."""
    await outbox.set_routes(
        db,
        [
            Route("deploy", "ops", "", ALL, KINDS),
            Route("*", "mail", "a@example.com", ALL, KINDS),
            Route("*", "mail", "b@example.com", ALL, KINDS),
            Route("other", "elsewhere", "", ALL, KINDS),
        ],
    )
    await new_run(db, "ex_1")
    async with db.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        await park(conn, "ex_1", [wait("ex_1", 1)])
        inside = await conn.fetchval("SELECT count(*) FROM outbox")
        await tx.rollback()
    assert inside == 3
    assert await rows(db) == []

    await park(db, "ex_1", [wait("ex_1", 1)])
    got = await rows(db)
    assert sorted((r["channel"], r["recipient"]) for r in got) == [
        ("mail", "a@example.com"),
        ("mail", "b@example.com"),
        ("ops", ""),
    ]
    assert {r["event"] for r in got} == {"wait.opened"}
    data = got[0]["data"]
    assert data["run"] == {
        "id": "ex_1",
        "workflow": "deploy",
        "business_id": "ex_1",
        "tenant": None,
        "status": "waiting",
    }
    assert data["wait"] == wait("ex_1", 1)


async def test_parking_again_on_the_same_wait_under_a_new_key_writes_nothing_more(
    db: asyncpg.Pool,
) -> None:
    """Our choice: a wait is announced once, however often its run parks on it again."""
    await outbox.set_routes(db, [Route("*", "ops", "", ALL, KINDS)])
    await new_run(db, "ex_1")
    await park(db, "ex_1", [wait("ex_1", 1)])
    await repo.append_event(db, "ex_1", "signal", {"name": "unrelated"})  # clears the waits
    await park(db, "ex_1", [wait("ex_1", 2)])
    await park(db, "ex_1", [wait("ex_1", 2), wait("ex_1", 2, "second", "2026-01-02T00:00:00")])
    got = await rows(db)
    assert [(r["event"], r["subject"]) for r in got] == [
        ("wait.opened", "approval:publish:2026-01-01T00:00:00+00:00"),
        ("wait.opened", "approval:second:2026-01-02T00:00:00"),
    ]


async def test_an_unrouted_workflow_and_a_filtered_kind_write_no_row(db: asyncpg.Pool) -> None:
    """Our choice: only routed workflows, and only the kinds a route takes, are announced."""
    await outbox.set_routes(db, [Route("deploy", "ops", "", ALL, ("signal",))])
    await new_run(db, "ex_1")
    await new_run(db, "ex_2", workflow="other")
    await park(db, "ex_1", [wait("ex_1", 1)])
    await park(db, "ex_2", [wait("ex_2", 1)])
    assert await rows(db) == []


async def test_an_answer_an_expiry_and_the_end_reach_the_channels_told_of_the_wait(
    db: asyncpg.Pool,
) -> None:
    """Our choice: a channel hears how each wait it was told of ends, and of the run's end."""
    await outbox.set_routes(
        db,
        [Route("*", "ops", "", ALL, KINDS), Route("*", "quiet", "", ("wait.opened",), KINDS)],
    )
    await new_run(db, "ex_1")
    first = wait("ex_1", 1, "pub:lish")
    second = wait("ex_1", 1, "other")
    await park(db, "ex_1", [first, second])
    await repo.insert_signal(
        db,
        "ex_1",
        "approval:pub:lish",
        str(first["key"]),
        {"decision": "approve", "ticket": "T-1"},
        "ann",
    )
    await repo.answer_keep_parked(
        db, "ex_1", [second], "answer", {"key": first["key"], "by": "ann"}
    )
    await db.execute(
        "INSERT INTO history (execution_id, event_id, type, data) VALUES "
        "('ex_1', 99, 'wait_timed_out', '{\"waits\": [\"approval:other\"]}')"
    )
    await db.execute("UPDATE executions SET status = 'failed', ended_at = now() WHERE id = 'ex_1'")
    got = [r for r in await rows(db) if r["channel"] == "ops"]
    assert [(r["event"], r["subject"]) for r in got] == [
        ("wait.opened", "approval:pub:lish:2026-01-01T00:00:00+00:00"),
        ("wait.opened", "approval:other:2026-01-01T00:00:00+00:00"),
        ("wait.answered", first["key"]),
        ("wait.expired", "approval:other:99"),
        ("run.ended", ""),
    ]
    answered = got[2]["data"]
    assert answered["answer"] == {"key": first["key"], "by": "ann", "decision": "approve"}
    assert answered["wait"]["prompt"] == "Ship it?"
    assert got[3]["data"]["wait"]["name"] == "other"
    assert got[4]["data"]["run"]["status"] == "failed"
    quiet = [r["event"] for r in await rows(db) if r["channel"] == "quiet"]
    assert quiet == ["wait.opened", "wait.opened"]


async def test_a_run_that_told_no_channel_of_a_wait_ends_without_a_row(db: asyncpg.Pool) -> None:
    """Our choice: `run.ended` closes what a channel was told; a run without waits is silent."""
    await outbox.set_routes(db, [Route("*", "ops", "", ALL, KINDS)])
    await new_run(db, "ex_1")
    await db.execute(
        "UPDATE executions SET status = 'completed', ended_at = now() WHERE id = 'ex_1'"
    )
    assert await rows(db) == []


async def test_routes_are_replaced_whole(db: asyncpg.Pool) -> None:
    """Routes not in the new set go; the others are rewritten."""
    await outbox.set_routes(db, [Route("*", "a", "", ALL, KINDS), Route("x", "b", "", ALL, KINDS)])
    await outbox.set_routes(db, [Route("x", "b", "", ("run.ended",), ("signal",))])
    got = await db.fetch("SELECT workflow, channel, events, kinds FROM notify_routes")
    assert [tuple(r) for r in got] == [("x", "b", ["run.ended"], ["signal"])]


async def test_a_claim_is_fenced_by_its_attempt(db: asyncpg.Pool) -> None:
    """A sender whose claim ran out and was taken over cannot mark the row."""
    await outbox.set_routes(db, [Route("*", "ops", "", ALL, KINDS)])
    await new_run(db, "ex_1")
    await park(db, "ex_1", [wait("ex_1", 1)])
    (first,) = await outbox.claim(db, "s1", ["ops"], 10, 0.001)
    await db.execute("SELECT pg_sleep(0.01)")
    (second,) = await outbox.claim(db, "s2", ["ops"], 10, 30)
    assert (first.delivery_id, first.attempt, second.attempt) == (second.delivery_id, 1, 2)
    assert not await outbox.mark_sent(db, first, "s1")
    assert await outbox.mark_sent(db, second, "s2")
    assert await outbox.claim(db, "s3", ["ops"], 10, 30) == []
