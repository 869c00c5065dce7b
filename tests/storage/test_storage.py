"""Storage: the named-query file, migrations, and the LISTEN connection."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from tests.conftest import direct_url, with_database
from tether.storage import migrate, pool, queries
from tether.storage.notify import CHANGE_CHANNEL, READY_CHANNEL, Listener


def test_queries_file_parses_into_the_expected_names() -> None:
    """Every query the repo uses exists; the parser strips comments and the semicolon."""
    expected = {
        "insert_execution",
        "get_execution",
        "get_executions",
        "get_execution_for_update",
        "get_by_idempotency_key",
        "get_chain",
        "list_executions",
        "get_history",
        "get_steps",
        "get_history_page",
        "get_steps_page",
        "get_starters",
        "claim_executions",
        "load_run_state",
        "checkpoint",
        "finish_update",
        "heartbeat",
        "append_event",
        "insert_signal",
        "answer_keep_parked",
        "insert_steps",
        "get_buffered_signals",
        "get_signal_by_key",
        "insert_update",
        "get_update",
        "request_cancel",
        "terminate_execution",
        "end_parked",
        "seal_execution",
        "link_successor",
        "delete_expired",
        "cancel_queued",
        "queues_with_backlog",
        "lock_queue",
        "admit_queued",
        "lock_workflow_starts",
        "live_run_of_workflow",
        "ensure_schedule",
        "lock_schedule",
        "set_schedule_tick",
        "insert_child_link",
        "rotate_page_executions",
        "reseal_executions",
        "rotate_page_steps",
        "reseal_steps",
        "rotate_page_signals",
        "reseal_signals",
        "rotate_page_updates",
        "reseal_updates",
        "insert_token",
        "list_tokens",
        "load_tokens",
        "revoke_token",
        "touch_tokens",
        "insert_audit",
        "list_audit",
        "delete_old_audit",
        "set_notify_routes",
        "claim_notifications",
        "mark_notification_sent",
        "retry_notification",
        "delete_old_notifications",
        "status_counts",
        "queue_backlog",
        "notification_backlog",
        "applied_migration",
        "insert_executions",
        "wake",
        "checkpoint_many",
        "checkpoint_one",
        "checkpoint_step",
        "run_clock_ahead",
        "get_created",
        "link_used",
        "use_link",
        "set_clock_ahead",
        "wake_due_runs",
        "clock_outlook",
        "schedule_remote_poll",
        "claim_remote_polls",
        "reschedule_remote_polls",
        "drop_remote_polls",
        "hasten_remote_polls",
    }
    assert set(queries.Q) == expected
    assert all(not sql.endswith(";") and not sql.startswith("--") for sql in queries.Q.values())


def test_query_parser_refuses_duplicates_and_empty_blocks() -> None:
    """A duplicated or empty block is a load-time error."""
    with pytest.raises(ValueError):
        queries.parse("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;")
    with pytest.raises(ValueError):
        queries.parse("-- name: a\n-- only a comment\n")


@pytest.mark.postgres
async def test_migrations_apply_once_and_a_second_run_is_a_no_op(server_url: str) -> None:
    """All migrations apply to an empty database in order; running again applies nothing."""
    name = "t_migrate_twice"
    admin = await asyncpg.connect(direct_url(server_url))
    await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        conn = await pool.connect(with_database(server_url, name))
        try:
            first = await migrate.migrate(conn)
            second = await migrate.migrate(conn)
            recorded = await conn.fetch("SELECT version, name FROM schema_migrations ORDER BY 1")
        finally:
            await conn.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    available = migrate.available()
    assert first == [m.version for m in available] and second == []
    assert [(r["version"], r["name"]) for r in recorded] == [(m.version, m.name) for m in available]


@pytest.mark.postgres
class _ProbeFails(Listener):
    """The probe's first query fails as asyncpg's did during a database restart in CI."""

    probes = 0

    async def _probe(self, conn: asyncpg.Connection) -> None:
        self.probes += 1
        if self.probes == 1:
            raise asyncpg.exceptions._base.InternalClientError(
                "cannot switch to state 12; another operation (2) is in progress"
            )
        await super()._probe(conn)


async def test_any_failure_of_the_listen_connection_reconnects_never_ends_the_listener(
    db_url: str,
) -> None:
    """An error outside the driver's connection errors (this one ended a server in CI: the
    listener's task group took the lifespan down) is a lost connection: reconnect."""
    listener = _ProbeFails(db_url, max_backoff=0.2)
    task = asyncio.create_task(listener.run())
    try:
        async with asyncio.timeout(10):
            while listener.probes < 2:  # failed once, connected again and probing
                assert not task.done(), task
                await asyncio.sleep(0.01)
            await listener.ready.wait()
    finally:
        listener.stop()
        await asyncio.wait_for(task, 10)


async def test_an_echoed_wake_up_is_delivered_at_once_and_its_notify_skipped_once(
    db_url: str,
) -> None:
    """`echo`: this process's subscribers hear a wake-up before it is sent (a batch's
    duplicates once, as PostgreSQL delivers a transaction's); the NOTIFY that carries it is
    then skipped here, once; a second one, or another payload, is delivered."""
    listener = Listener(db_url, max_backoff=0.2)
    got: list[str] = []
    heard = asyncio.Event()

    def hear(_channel: str, payload: str) -> None:
        if payload:  # not the wake-everyone of a (re)connect
            got.append(payload)
            heard.set()

    listener.subscribe(CHANGE_CHANNEL, hear)
    task = asyncio.create_task(listener.run())
    conn = await asyncpg.connect(direct_url(db_url))
    try:
        async with asyncio.timeout(10):
            await listener.ready.wait()
            listener.echo([(CHANGE_CHANNEL, "x"), (CHANGE_CHANNEL, "x")])
            assert got == ["x"]  # at once, before any NOTIFY
            await conn.execute("SELECT pg_notify($1, 'x')", CHANGE_CHANNEL)  # its own: skipped
            await conn.execute("SELECT pg_notify($1, 'y')", CHANGE_CHANNEL)
            await conn.execute("SELECT pg_notify($1, 'x')", CHANGE_CHANNEL)  # a new one
            while len(got) < 3:
                heard.clear()
                await heard.wait()
    finally:
        listener.stop()
        await asyncio.wait_for(task, 5)
        await conn.close()
    assert got == ["x", "y", "x"]


async def test_listener_delivers_notifications_and_reconnects(db_url: str) -> None:
    """A NOTIFY reaches the subscriber; after the server kills the LISTEN connection the
    listener reconnects by itself and delivers again."""
    listener = Listener(db_url, max_backoff=0.2)
    got: asyncio.Queue[str] = asyncio.Queue()
    listener.subscribe(READY_CHANNEL, lambda _c, payload: got.put_nowait(payload))
    task = asyncio.create_task(listener.run())
    conn = await asyncpg.connect(direct_url(db_url))
    try:
        async with asyncio.timeout(10):
            await listener.ready.wait()
            await conn.execute("SELECT pg_notify($1, 'one')", READY_CHANNEL)
            while await got.get() != "one":
                pass
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid()"
            )
            while listener.ready.is_set():  # noqa: ASYNC110 — ready has no "cleared" event
                await asyncio.sleep(0.01)
            await listener.ready.wait()
            await conn.execute("SELECT pg_notify($1, 'two')", READY_CHANNEL)
            while await got.get() != "two":
                pass
    finally:
        listener.stop()
        await asyncio.wait_for(task, 5)
        await conn.close()
