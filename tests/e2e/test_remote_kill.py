"""SIGKILL our worker in the middle of a remote call: after the remote created the task but
before its id was recorded, and after the first poll. The next worker finishes the call on the
same remote task: exactly one task exists on the remote each time (Tether, as the remote,
returns the same task for a create repeated under the same Idempotency-Key; the test's A2A
agent, for a message repeated under the same messageId)."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from tests.apps import killable_agent, remote_tools
from tests.apps.killable_remote import app
from tests.e2e import agents
from tests.e2e.conftest import Workers, wait_exit
from tests.e2e.remotes import Peer, Process, peer
from tether.runtime.operations import Operations
from tether.testing.databases import Databases

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.slow]

TIMEOUT = 60


@pytest.fixture
async def remote(tether_databases: Databases) -> AsyncIterator[Peer]:
    async with peer(remote_tools.app, tether_databases) as found:
        yield found


def _remotes(remote: Peer) -> str:
    return json.dumps({"peer": {"url": remote.url, "poll_min_s": 0.05, "poll_max_s": 0.2}})


@pytest.mark.parametrize(
    "point",
    ["remote:peer/hold:after", "remote:peer/hold:poll:after"],
    ids=["mid-create", "mid-poll"],
)
async def test_a_killed_worker_leaves_exactly_one_remote_task_and_the_next_finishes_it(
    point: str, remote: Peer, db: asyncpg.Pool, db_url: str, tmp_path: Path
) -> None:
    """Worker 1 dies by SIGKILL at `point`; worker 2 resumes the call on the same task."""
    workers = Workers(db_url, tmp_path, "tests/apps/killable_remote.py:app")
    env = {"TETHER_REMOTES": _remotes(remote)}
    try:
        ops = Operations(db, app)
        run = (await ops.start("relay_hold", {"text": point})).execution.id
        first = workers.spawn("worker1", KILL_AT=point, TETHER_LEASE_S="1", **env)
        code = await wait_exit(first, TIMEOUT)
        assert code == -signal.SIGKILL, f"worker 1 exited {code}:\n{workers.log('worker1')}"
        theirs = await remote.one_run("hold")
        recorded = [s.result.get("task") for s in await ops.steps(run) if s.kind == "remote"]
        if point.endswith(":poll:after"):  # the task id was committed before the first poll
            assert recorded == [theirs]  # a Tether task's id is its run's id
        else:  # killed before it: nothing of the call was recorded
            assert recorded == []

        second = workers.spawn("worker2", TETHER_LEASE_S="5", **env)
        async with asyncio.timeout(TIMEOUT):  # the call is parked on the remote task again
            while True:
                if (await ops.get(run)).current.status == "waiting":
                    break
                await asyncio.sleep(0.05)
        await remote.ops.signal(theirs, "release")
        row = (await ops.wait_for_end(run, timeout=TIMEOUT)).current
        second.send_signal(signal.SIGTERM)
        assert await wait_exit(second, 20) == 0, workers.log("worker2")
    finally:
        workers.kill_all()
    assert row.status == "completed", (row.error, workers.log("worker2"))
    assert row.output == {"released": point}
    assert [r["id"] for r in await remote.runs("hold")] == [theirs]
    (record,) = [s for s in await ops.steps(run) if s.kind == "remote"]
    assert record.done


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[Process]:
    async with agents.agent(tmp_path).running() as found:
        yield found


async def _parked(ops: Operations, run: str) -> None:
    async with asyncio.timeout(TIMEOUT):
        while True:
            if (await ops.get(run)).current.status == "waiting":
                return
            await asyncio.sleep(0.05)


@pytest.mark.parametrize(
    "point",
    ["remote:agent:after", "remote:agent:poll:after"],
    ids=["mid-create", "mid-poll"],
)
async def test_a_killed_worker_leaves_exactly_one_agent_task_and_the_next_finishes_it(
    point: str, agent: Process, db: asyncpg.Pool, db_url: str, tmp_path: Path
) -> None:
    """Worker 1 dies by SIGKILL at `point` of an `ask_agent`; worker 2 resends the message
    under the same messageId (mid-create) or polls the recorded task (mid-poll): the agent
    holds one task, which completes."""
    workers = Workers(db_url, tmp_path, "tests/apps/killable_agent.py:app")
    config = {"url": agent.url, "protocol": "a2a", "poll_min_s": 0.05, "poll_max_s": 0.2}
    env = {"TETHER_REMOTES": json.dumps({"agent": config})}
    try:
        ops = Operations(db, killable_agent.app)
        run = (await ops.start("ask_hold", {"text": point})).execution.id
        first = workers.spawn("worker1", KILL_AT=point, TETHER_LEASE_S="1", **env)
        code = await wait_exit(first, TIMEOUT)
        assert code == -signal.SIGKILL, f"worker 1 exited {code}:\n{workers.log('worker1')}"
        (theirs,) = await agents.tasks(agent)
        recorded = [s.result.get("task") for s in await ops.steps(run) if s.kind == "remote"]
        assert recorded == ([theirs.id] if point.endswith(":poll:after") else [])

        second = workers.spawn("worker2", TETHER_LEASE_S="5", **env)
        await _parked(ops, run)
        await agents.release(agent, theirs.id)
        row = (await ops.wait_for_end(run, timeout=TIMEOUT)).current
        second.send_signal(signal.SIGTERM)
        assert await wait_exit(second, 20) == 0, workers.log("worker2")
    finally:
        workers.kill_all()
    assert row.status == "completed", (row.error, workers.log("worker2"))
    assert row.output == f"released: {point}"
    assert [t.id for t in await agents.tasks(agent)] == [theirs.id]
