"""A workflow asks an A2A agent (`ctx.ask_agent`) over loopback HTTP: the agent is built with
the A2A SDK's own server (tests/apps/a2a_agent.py, in a process of its own) and every check of
"exactly one task" asks the agent itself, with the SDK's client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from a2a.types import TaskState
from pydantic import BaseModel

from tests.e2e import agents
from tests.e2e.conftest import serve
from tests.e2e.remotes import Process, completed, remote_task
from tests.mcp_client import McpClient
from tether.runtime.context import Context
from tether.runtime.dag.status import dag_status
from tether.runtime.exposure import Exposure
from tether.runtime.operations import Operations
from tether.runtime.policy import RetryPolicy
from tether.runtime.registry import App
from tether.runtime.remote.a2a import REPLY_FORM, context_id
from tether.runtime.remote.call import idempotency_key
from tether.runtime.remote.errors import RemoteError

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

TIMEOUT = 30
#: Fast retries: an agent that is down is tried again every few tenths of a second.
FAST = RetryPolicy(max_attempts=60, initial_interval=0.05, max_interval=0.3)


class Ask(BaseModel):
    message: str
    data: dict[str, Any] | None = None
    timeout: float | None = None


def requester(url: str) -> App:
    """Our side: `ask` sends the agent its input's message and returns the reply, or the
    error's type and fields."""
    app = App("requester")
    app.remote("agent", url=url, protocol="a2a", poll_min=0.05, poll_max=0.2, retry=FAST)

    @app.workflow(expose=Exposure(tool_set=True))
    async def ask(ctx: Context, call: Ask) -> dict[str, Any]:
        try:
            value = await ctx.ask_agent("agent", call.message, data=call.data, timeout=call.timeout)
        except RemoteError as exc:
            return {"error": type(exc).__name__, "message": str(exc), **exc.extra()}
        return {"value": value}

    return app


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[Process]:
    """The agent, its tasks in memory."""
    async with agents.agent(tmp_path).running() as found:
        yield found


@pytest.fixture
async def kept(tmp_path: Path) -> AsyncIterator[Process]:
    """The agent, its tasks kept in files: a restart keeps them."""
    async with agents.agent(tmp_path, tmp_path / "store").running() as found:
        yield found


async def _ask(ops: Operations, message: str, **extra: Any) -> str:
    return (await ops.start("ask", {"message": message, **extra})).execution.id


async def _questions(ops: Operations, run: str) -> list[dict[str, Any]]:
    """The run's open `remote_input` waits, once there are some."""
    async with asyncio.timeout(TIMEOUT):
        while True:
            row = (await ops.get(run)).current
            found = [w for w in row.waits if w["kind"] == "remote_input"]
            if found:
                return found
            await asyncio.sleep(0.02)


async def test_a_completed_task_returns_its_artifacts_and_message_from_one_task(
    agent: Process, db_url: str, db: asyncpg.Pool
) -> None:
    """The reply holds the artifacts' text and data and the agent's final message; the
    message's data part reached the agent; one task exists, in the context derived from
    the call."""
    app = requester(agent.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = await _ask(ops, "echo hi", data={"k": 7})
        out = await completed(ops, run)
        (record,) = [s for s in await ops.steps(run) if s.kind == "remote"]
    reply = out["value"]
    assert (reply["text"], reply["data"]) == ("echo: hi", [{"k": 7}])
    assert [a["name"] for a in reply["artifacts"]] == ["echo", "data"]
    assert reply["artifacts"][0]["parts"] == [{"text": "echo: hi"}]
    assert reply["message"]["parts"] == [{"text": "done"}]
    assert reply["message"]["role"] == "ROLE_AGENT"
    (theirs,) = await agents.tasks(agent)
    assert theirs.context_id == context_id(idempotency_key(run, 1, record.seq))
    assert theirs.status.state == TaskState.TASK_STATE_COMPLETED


async def test_an_agent_answering_with_a_message_ends_the_call_without_a_task(
    agent: Process, db_url: str, db: asyncpg.Pool
) -> None:
    app = requester(agent.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = await _ask(ops, "reply hello")
        out = await completed(ops, run)
        (record,) = [s for s in await ops.steps(run) if s.kind == "remote"]
    assert out["value"]["text"] == "you said hello"
    assert out["value"]["artifacts"] == []
    assert record.result == {"value": out["value"]}  # ended at once: no task recorded
    assert await agents.tasks(agent) == []


async def test_a_failed_task_and_a_rejected_one_are_told_apart(
    agent: Process, db_url: str, db: asyncpg.Pool
) -> None:
    """`failed` raises RemoteProtocolError with the agent's words; `rejected` raises
    RemoteRejected (a RemoteProtocolError too) with its status message as data."""
    app = requester(agent.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        failed = await completed(ops, await _ask(ops, "fail bad disk"))
        rejected = await completed(ops, await _ask(ops, "reject not my job"))
    assert (failed["error"], failed["message"], failed["code"]) == (
        "RemoteProtocolError",
        "bad disk",
        None,
    )
    assert (rejected["error"], rejected["message"]) == ("RemoteRejected", "not my job")
    assert rejected["data"]["message"]["parts"] == [{"text": "not my job"}]


async def test_the_agents_question_is_answered_by_a_person_through_our_task(
    agent: Process, db_url: str, db: asyncpg.Pool
) -> None:
    """`input-required` shows on our run's MCP task as a form with one `reply` field; our
    `tasks/update` answers it; the agent gets the reply and asks again (a new key of ours);
    the second answer completes the task."""
    app = requester(agent.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url) as url:
        client = McpClient(url)
        try:
            run = await _ask(ops, "ask Your name?")
            first = await client.wait_task(run, {"input_required"}, timeout=TIMEOUT)
            ((key, request),) = first["inputRequests"].items()
            assert request["params"]["message"] == "Your name?"
            assert request["params"]["requestedSchema"] == REPLY_FORM
            answer = {"action": "accept", "content": {"reply": "again"}}
            await client.result("tasks/update", {"taskId": run, "inputResponses": {key: answer}})
            async with asyncio.timeout(TIMEOUT):
                while True:
                    task = await client.wait_task(run, {"input_required"}, timeout=TIMEOUT)
                    if key not in task["inputRequests"]:
                        break
                    await asyncio.sleep(0.05)
            ((second, request),) = task["inputRequests"].items()
            assert request["params"]["message"] == "And your surname?"
            answer = {"action": "accept", "content": {"reply": "Lovelace"}}
            await client.result("tasks/update", {"taskId": run, "inputResponses": {second: answer}})
            out = await completed(ops, run)
        finally:
            await client.aclose()
        history = await ops.history(run)
    assert out["value"]["text"] == "hello Lovelace"
    assert len(await agents.tasks(agent)) == 1
    sent = [e.data["keys"] for e in history if e.type == "remote_answered"]
    assert sent == [[key], [second]]


async def test_cancelling_our_run_cancels_the_agents_task_once(
    agent: Process, db_url: str, db: asyncpg.Pool
) -> None:
    app = requester(agent.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = await _ask(ops, "hold on")
        theirs = await remote_task(ops, run)
        await ops.cancel(run)
        assert (await ops.wait_for_end(run, timeout=TIMEOUT)).current.status == "cancelled"
        history = await ops.history(run)
    assert (await agents.task(agent, theirs)).status.state == TaskState.TASK_STATE_CANCELED
    notes = [e.data["outcome"] for e in history if e.type == "remote_cancel"]
    assert notes == ["acknowledged"]


async def test_a_task_cancelled_by_the_agents_other_client_raises_remote_cancelled(
    agent: Process, db_url: str, db: asyncpg.Pool
) -> None:
    app = requester(agent.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = await _ask(ops, "hold on")
        await agents.cancel(agent, await remote_task(ops, run))
        out = await completed(ops, run)
    assert out["error"] == "RemoteCancelled"


async def test_a_call_past_its_timeout_cancels_the_agents_task(
    agent: Process, db_url: str, db: asyncpg.Pool
) -> None:
    app = requester(agent.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = await _ask(ops, "hold on", timeout=1.0)
        theirs = await remote_task(ops, run)
        out = await completed(ops, run)
    assert out["error"] == "RemoteTimeout"
    assert (await agents.task(agent, theirs)).status.state == TaskState.TASK_STATE_CANCELED


async def test_an_agent_that_restarts_while_it_waits_for_input_is_answered_after(
    kept: Process, db_url: str, db: asyncpg.Pool
) -> None:
    """The agent keeps its tasks: while it is down our polls fail and back off; once it is
    back the person's answer reaches the same task, which completes."""
    app = requester(kept.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = await _ask(ops, "ask Your name?")
        asks = await _questions(ops, run)
        kept.kill()
        await kept.start()  # a new process: the same tasks, read from its files
        (ask,) = asks
        await ops.answer(run, ask["key"], {"reply": "Ada"})
        out = await completed(ops, run)
    assert out["value"]["text"] == "hello Ada"
    assert len(await agents.tasks(kept)) == 1


async def test_an_agent_restart_that_loses_its_tasks_reports_the_task_lost(
    agent: Process, db_url: str, db: asyncpg.Pool
) -> None:
    """An unknown task id is the SDK's TaskNotFoundError: the call ends RemoteTaskLost."""
    app = requester(agent.url)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = await _ask(ops, "hold on")
        await remote_task(ops, run)
        agent.kill()
        await agent.start()  # its tasks lived in memory
        out = await completed(ops, run)
    assert out["error"] == "RemoteTaskLost"


DAG = """\
name: agent_steps
params:
  - WHO: nobody
steps:
  - name: greet
    action: a2a.ask
    with:
      remote: agent
      message: "echo hi ${WHO}"
      data: {who: "${WHO}"}
    output: GREETING
  - name: ask
    action: a2a.ask
    with: {remote: agent, message: "ask Who signs ${GREETING}?"}
    output: SIGNED
  - name: fail
    action: a2a.ask
    with: {remote: agent, message: "fail broken"}
    continueOn: {failure: true}
"""


async def test_a_dag_asks_the_agent_with_outputs_a_question_and_a_failure(
    agent: Process, db_url: str, db: asyncpg.Pool
) -> None:
    """`action: a2a.ask`: the reply's text is the step's output and flows into the next
    message; the agent's question waits on the DAG run; a failed task fails its step."""
    app = App("dag-asker")
    app.remote("agent", url=agent.url, protocol="a2a", poll_min=0.05, poll_max=0.2, retry=FAST)
    app.dag(DAG)
    ops = Operations(db, app)
    async with asyncio.timeout(TIMEOUT), serve(app, db_url):
        run = (await ops.start("agent_steps", {"params": "WHO=Ada"})).execution.id
        (ask,) = await _questions(ops, run)
        assert ask["prompt"] == "Who signs echo: hi Ada?"
        assert ask["name"].startswith("node:ask#")
        await ops.answer(run, ask["key"], {"reply": "Bo"})
        row = (await ops.wait_for_end(run, timeout=TIMEOUT)).current
        steps = await ops.steps(run)
    assert row.status == "completed", row.error
    assert row.output["outputs"] == {"GREETING": "echo: hi Ada", "SIGNED": "hello Bo"}
    greet = next(s for s in steps if s.kind == "remote" and s.name == "node:greet")
    assert greet.result["value"]["data"] == [{"who": "Ada"}]
    detail = dag_status(row, steps)
    assert [(s.name, s.status_label) for s in detail.steps] == [
        ("greet", "succeeded"),
        ("ask", "succeeded"),
        ("fail", "failed"),
    ]
    assert len(await agents.tasks(agent)) == 3
