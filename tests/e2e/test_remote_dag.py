"""A DAG step calls a remote tool (`action: mcp.call`, Tether's own action) against another
Tether server: its value is the step's output, a remote question waits on the DAG run, a
remote error fails the step, and the Dagu view reads the step from its record."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.apps import remote_tools
from tests.e2e.conftest import serve
from tests.e2e.remotes import Peer, peer
from tether.runtime.dag.status import dag_status
from tether.runtime.operations import Operations
from tether.runtime.policy import RetryPolicy
from tether.runtime.registry import App
from tether.testing.databases import Databases

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

TIMEOUT = 30

SPEC = """\
name: remote_steps
params:
  - WHO: nobody
steps:
  - name: greet
    action: mcp.call
    with:
      remote: peer
      tool: echo
      arguments:
        text: "hi ${WHO}"
    output: GREETING
  - name: ask
    action: mcp.call
    with:
      remote: peer
      tool: ask
      arguments: {question: "Who signs ${GREETING}?"}
    output: SIGNED
  - name: fail
    action: mcp.call
    with: {remote: peer, tool: fail, arguments: {text: broken}}
    continueOn: {failure: true}
"""


@pytest.fixture
async def remote(tether_databases: Databases) -> AsyncIterator[Peer]:
    async with peer(remote_tools.app, tether_databases) as found:
        yield found


def requester(url: str) -> App:
    app = App("dag-requester")
    fast = RetryPolicy(max_attempts=60, initial_interval=0.05, max_interval=0.3)
    app.remote("peer", url=url, poll_min=0.05, retry=fast)
    app.dag(SPEC)
    return app


async def test_a_dag_runs_remote_steps_with_outputs_a_question_and_a_failure(
    remote: Peer, db_url: str, db: asyncpg.Pool
) -> None:
    """Outputs flow into the next step's arguments; the question is answered on our run;
    the failing step fails (continueOn lets the run succeed); dag_status agrees."""
    app = requester(remote.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = (await ops.start("remote_steps", {"params": "WHO=Ada"})).execution.id
        async with asyncio.timeout(TIMEOUT):
            while True:
                row = (await ops.get(run)).current
                asks = [w for w in row.waits if w["kind"] == "remote_input"]
                if asks:
                    break
                await asyncio.sleep(0.02)
        (ask,) = asks
        assert ask["prompt"] == 'Who signs {"echo": "hi Ada"}?'
        assert ask["name"].startswith("node:ask#")
        await ops.answer(run, ask["key"], {"name": "Bo"})
        row = (await ops.wait_for_end(run, timeout=TIMEOUT)).current
        steps = await ops.steps(run)
    assert row.status == "completed", row.error
    outputs = row.output["outputs"]
    assert json.loads(outputs["GREETING"]) == {"echo": "hi Ada"}
    assert json.loads(outputs["SIGNED"]) == {"greeting": "hello Bo"}
    detail = dag_status(row, steps)
    assert [(s.name, s.status_label) for s in detail.steps] == [
        ("greet", "succeeded"),
        ("ask", "succeeded"),
        ("fail", "failed"),
    ]
    assert len(await remote.runs("echo")) == 1
    assert len(await remote.runs("fail")) == 1
