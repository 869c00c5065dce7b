"""A run waiting on another Tether server's task follows it over that server's
`subscriptions/listen` stream as well as polling it: with a poll interval of an hour, the
remote's completion still reaches the run through the stream; with the stream cut by a restart
of the remote and not opened again, the poll finishes the call; and a stream the restart
dropped is opened again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from pydantic import BaseModel

from tests.apps import remote_tools
from tests.e2e.conftest import serve
from tests.e2e.remotes import Peer, completed, peer, remote_task
from tether.runtime.context import Context
from tether.runtime.operations import Operations
from tether.runtime.policy import RetryPolicy
from tether.runtime.registry import App
from tether.runtime.remote import poller
from tether.runtime.remote.follow import Follower, FollowSettings
from tether.testing.databases import Databases

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

TIMEOUT = 30
#: A poll interval no test waits out: a change seen within TIMEOUT came through the stream.
HOUR = 3600.0
FAST = RetryPolicy(max_attempts=60, initial_interval=0.05, max_interval=0.3)


class Call(BaseModel):
    tool: str
    arguments: dict[str, Any] = {}


def requester(url: str, *, poll_s: float) -> App:
    """Our side: `relay` calls the remote tool its input names, polling every `poll_s`."""
    app = App("requester")
    app.remote("peer", url=url, poll_min=poll_s, poll_max=poll_s, retry=FAST)

    @app.workflow
    async def relay(ctx: Context, call: Call) -> Any:
        return await ctx.call_tool("peer", call.tool, call.arguments)

    return app


@pytest.fixture
async def remote(tether_databases: Databases) -> AsyncIterator[Peer]:
    async with peer(remote_tools.app, tether_databases) as found:
        yield found


def _follower(app: App) -> Follower:
    (found,) = app.remote_clients.followers
    assert isinstance(found, Follower)
    return found


async def _covered(app: App, task: str, *, covered: bool = True) -> None:
    """Until the follower's stream to the peer covers `task` (or, `covered=False`, does not)."""
    async with asyncio.timeout(TIMEOUT):
        while True:
            if (task in _follower(app).covered("peer")) == covered:
                return
            await asyncio.sleep(0.02)


async def _parked(ops: Operations, run: str) -> None:
    async with asyncio.timeout(TIMEOUT):
        while True:
            if (await ops.get(run)).current.status == "waiting":
                return
            await asyncio.sleep(0.02)


async def test_a_remote_completion_reaches_the_run_through_the_stream_long_before_its_poll(
    remote: Peer, db_url: str, db: asyncpg.Pool
) -> None:
    """Spec (Tasks, status notifications): the pushed view makes the poll due now; the run
    polls an hour apart, so only the stream can tell it within the test's bound."""
    app = requester(remote.url, poll_s=HOUR)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = (await ops.start("relay", {"tool": "hold", "arguments": {"text": "x"}})).execution.id
        task = await remote_task(ops, run)
        await _parked(ops, run)
        await _covered(app, task)
        await remote.ops.signal(await remote.one_run("hold"), "release")
        assert await completed(ops, run) == {"released": "x"}
        assert _follower(app).pokes >= 1
    assert len(await remote.runs("hold")) == 1


async def test_with_the_stream_cut_by_a_remote_restart_the_poll_still_finishes_the_task(
    remote: Peer, db_url: str, db: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our choice: the timers stay as the fallback. The stream dropped with the remote and is
    not opened again (its backoff outlasts the test); the poll sees the completion."""
    monkeypatch.setattr(poller, "FollowSettings", lambda: FollowSettings(retry_min_s=HOUR))
    app = requester(remote.url, poll_s=0.2)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = (await ops.start("relay", {"tool": "hold", "arguments": {"text": "y"}})).execution.id
        task = await remote_task(ops, run)
        await _covered(app, task)
        await remote.stop()
        await _covered(app, task, covered=False)
        await remote.start()
        await remote.ops.signal(await remote.one_run("hold"), "release")
        assert await completed(ops, run) == {"released": "y"}
        follower = _follower(app)
        assert follower.covered("peer") == frozenset()
        assert follower.opened == 1
    assert len(await remote.runs("hold")) == 1


async def test_a_stream_dropped_by_a_remote_restart_is_opened_again_and_tells_the_end(
    remote: Peer, db_url: str, db: asyncpg.Pool
) -> None:
    """Our choice: a dropped stream is opened again after its backoff, over the same tasks;
    the run, polling an hour apart, learns of the completion through the new stream."""
    app = requester(remote.url, poll_s=HOUR)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = (await ops.start("relay", {"tool": "hold", "arguments": {"text": "z"}})).execution.id
        task = await remote_task(ops, run)
        await _covered(app, task)
        await remote.stop()
        await _covered(app, task, covered=False)
        await remote.start()
        await _covered(app, task)
        assert _follower(app).opened == 2
        await remote.ops.signal(await remote.one_run("hold"), "release")
        assert await completed(ops, run) == {"released": "z"}
    assert len(await remote.runs("hold")) == 1
