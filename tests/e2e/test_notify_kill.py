"""SIGKILL the process that is delivering a notification, after the receiver has it and
before the sender could mark it sent: another process delivers it again once the claim runs
out, with the same delivery id, and nothing is lost or delivered a third time."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import asyncpg
import pytest

from tests.apps.notifying import app
from tests.e2e.conftest import Workers, wait_exit
from tests.receivers import Received, http_receiver
from tests.waiting import until
from tether.runtime.notify.signing import verify_webhook_signature
from tether.runtime.operations import Operations

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.slow]

SECRET = "kill-test-secret"  # noqa: S105 — a made-up test secret


async def test_a_sender_killed_between_send_and_mark_is_redelivered_once_with_the_same_id(
    db: asyncpg.Pool, db_url: str, tmp_path: Path
) -> None:
    """Our choice (at-least-once): the one repeat a crash can cause carries the delivery id."""
    workers = Workers(db_url, tmp_path, "tests/apps/notifying.py:app")
    first_pid: list[int] = []

    def kill_the_first_sender(got: Received) -> None:
        # The receiver has the request; the sender has not heard back, so it cannot have
        # marked it: kill it now, before the reply goes out.
        if len(first_pid) == 1:
            os.kill(first_pid.pop(), signal.SIGKILL)

    env = {
        "NOTIFY_TEST_SECRET": SECRET,
        "TETHER_NOTIFY_LEASE_S": "3",
        "TETHER_NOTIFY_POLL_S": "0.1",
        "TETHER_JANITOR_INTERVAL_S": "3600",
    }
    try:
        async with http_receiver() as receiver:
            receiver.on_request = kill_the_first_sender
            env["NOTIFY_TEST_URL"] = receiver.url
            ops = Operations(db, app)
            run_id = (await ops.start("ask")).execution.id
            first = workers.spawn("worker1", **env)
            first_pid.append(first.pid)
            code = await wait_exit(first, 60)
            assert code == -signal.SIGKILL, f"worker 1 exited {code}:\n{workers.log('worker1')}"
            assert len(receiver.received) == 1

            workers.spawn("worker2", **env)
            sent = await until(
                lambda: db.fetchrow(
                    "SELECT delivery_id, attempts FROM outbox WHERE sent_at IS NOT NULL"
                ),
                timeout=60,
                what="the notification delivered again and marked sent",
            )
            # Something that comes after any third delivery would: a second run's notice.
            second_id = (await ops.start("ask")).execution.id
            await receiver.wait_for(
                lambda got: any(second_id.encode() in r.body for r in got), timeout=60
            )
            await until(
                lambda: db.fetchval("SELECT count(*) = 2 FROM outbox WHERE sent_at IS NOT NULL"),
                timeout=60,
                what="the second notification marked sent",
            )
    finally:
        workers.kill_all()
    about_first = [r for r in receiver.received if run_id.encode() in r.body]
    assert len(about_first) == 2, [r.delivery_id for r in receiver.received]
    assert {r.delivery_id for r in about_first} == {sent["delivery_id"]}
    assert sent["attempts"] == 2
    assert about_first[0].body == about_first[1].body  # the same notification, signed anew
    assert all(
        verify_webhook_signature(SECRET, r.headers["tether-signature"], r.body)
        for r in receiver.received
    )
