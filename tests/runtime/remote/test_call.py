"""The durable remote call against a scripted remote (respx on the outbound client) and a real
database: transient failures are retried with backoff under the same key, refusals are not,
the bearer token is never stored, a parked call is polled without replaying the run, and a
cancel the remote refuses is noted."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import asyncpg
import httpx
import orjson
import pytest
from pydantic import BaseModel

from tests.runtime.conftest import Start
from tests.runtime.remote.fake import (
    CREATED,
    TASK,
    URL,
    FakeRemote,
    completed,
    rpc_error,
    run_completed,
    task,
)
from tether.observability import metrics
from tether.runtime.context import Context
from tether.runtime.operations import Operations
from tether.runtime.policy import RetryPolicy
from tether.runtime.registry import App
from tether.runtime.remote.call import MAX_ROUNDS
from tether.runtime.remote.errors import RemoteError
from tether.testing import WorkflowEnvironment

pytestmark = pytest.mark.postgres

TIMEOUT = 20
BEARER_ENV = "REMOTE_CALL_TEST_BEARER"
SECRET = "sk-very-secret-value-0042"  # noqa: S105 — a stand-in token for the test


class Call(BaseModel):
    remote: str = "peer"
    tool: str = "work"
    arguments: dict[str, Any] = {}


def _app(**remote: Any) -> App:
    app = App("caller")
    options: dict[str, Any] = {"poll_min": 0.02, "retry": RetryPolicy(5, 0.01, 2.0, 0.05)}
    app.remote("peer", url=URL, **{**options, **remote})

    @app.workflow
    async def relay(ctx: Context, call: Call) -> dict[str, Any]:
        try:
            value = await ctx.call_tool(call.remote, call.tool, call.arguments)
        except RemoteError as exc:
            return {"error": type(exc).__name__, "message": str(exc), **exc.extra()}
        return {"value": value}

    return app


async def _run(start: Start, db: asyncpg.Pool, app: App, fake: FakeRemote, **call: Any) -> Any:
    return await run_completed(start, db, app, fake, "relay", call, timeout=TIMEOUT)


async def test_a_create_answered_503_is_retried_with_backoff_under_the_same_key(
    start: Start, db: asyncpg.Pool
) -> None:
    """Transient failures are retried (durably, the run parked for the backoff); every try
    carries the call's one Idempotency-Key."""
    fake = FakeRemote(
        {
            "tools/call": [httpx.Response(503), httpx.ConnectError("down"), CREATED],
            "tasks/get": [completed({"n": 1})],
        }
    )
    assert await _run(start, db, _app(), fake) == {"value": {"n": 1}}
    keys = {h["idempotency-key"] for h in fake.headers("tools/call")}
    assert len(fake.calls("tools/call")) == 3 and len(keys) == 1


async def test_a_refused_create_is_not_retried(start: Start, db: asyncpg.Pool) -> None:
    """A JSON-RPC error on create (an unknown tool: -32602) ends the call at once."""
    fake = FakeRemote({"tools/call": [rpc_error(-32602, "Unknown tool: work", status=400)]})
    out = await _run(start, db, _app(), fake)
    assert (out["error"], out["code"]) == ("RemoteProtocolError", -32602)
    assert len(fake.calls("tools/call")) == 1


async def test_a_remote_that_stays_down_fails_the_call_after_its_tries(
    start: Start, db: asyncpg.Pool
) -> None:
    fake = FakeRemote({"tools/call": [httpx.ConnectError("down")]})
    out = await _run(start, db, _app(retry=RetryPolicy(3, 0.01, 1.0, 0.01)), fake)
    assert out["error"] == "RemoteUnavailable"
    assert len(fake.calls("tools/call")) == 3


async def test_a_task_that_disappears_is_lost(start: Start, db: asyncpg.Pool) -> None:
    """Spec (Tasks): tasks/get of an unknown or expired task is -32602."""
    fake = FakeRemote({"tools/call": [CREATED], "tasks/get": [rpc_error(-32602, "Task not found")]})
    out = await _run(start, db, _app(), fake)
    assert out["error"] == "RemoteTaskLost"


async def test_the_bearer_token_is_sent_but_never_stored(
    start: Start, db: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Credentials live in the environment: sent on every request, never in the run's
    records, history or output."""
    monkeypatch.setenv(BEARER_ENV, SECRET)
    fake = FakeRemote({"tools/call": [CREATED], "tasks/get": [completed({"ok": True})]})
    app = _app(token_env=BEARER_ENV)
    assert await _run(start, db, app, fake) == {"value": {"ok": True}}
    assert {h["authorization"] for _, _, h in fake.seen} == {f"Bearer {SECRET}"}
    stored = [
        await db.fetch(f"SELECT * FROM {table}")
        for table in ("executions", "history", "steps", "signals", "remote_polls")
    ]
    text = orjson.dumps([[dict(r) for r in rows] for rows in stored], default=str).decode()
    assert SECRET not in text
    assert SECRET not in repr(app.remotes["peer"])


async def test_a_parked_call_is_polled_without_replaying_its_run(
    start: Start, db: asyncpg.Pool
) -> None:
    """Waiting costs a request per poll: the poller polls while the run stays parked (its
    claims, `attempt`, do not grow with the polls) and wakes it once the task ended."""
    polls = 12
    script: list[Any] = [task("working", pollIntervalMs=20)] * polls
    fake = FakeRemote({"tools/call": [CREATED], "tasks/get": [*script, completed("done")]})
    app = _app()
    ops = Operations(db, app)
    with fake.mounted(URL):
        async with asyncio.timeout(TIMEOUT), start(app):
            run = (await ops.start("relay", {})).execution.id
            view = await ops.wait_for_end(run, timeout=TIMEOUT)
    assert view.current.output == {"value": "done"}
    assert len(fake.calls("tasks/get")) >= polls + 1
    # claims: the first, the wake after the end was seen (and none per poll)
    assert view.current.attempt <= 3
    assert {p["taskId"] for p in fake.calls("tasks/get")} == {TASK}


async def test_a_cancel_the_remote_refuses_is_noted_and_the_run_ends_cancelled(
    start: Start, db: asyncpg.Pool
) -> None:
    fake = FakeRemote(
        {
            "tools/call": [CREATED],
            "tasks/get": [task("working", pollIntervalMs=20)],
            "tasks/cancel": [rpc_error(-32603, "cannot stop now")],
        }
    )
    app = _app()
    ops = Operations(db, app)
    with fake.mounted(URL):
        async with asyncio.timeout(TIMEOUT), start(app):
            run = (await ops.start("relay", {})).execution.id
            while True:
                if (await ops.get(run)).current.status == "waiting":
                    break
                await asyncio.sleep(0.01)
            await ops.cancel(run)
            view = await ops.wait_for_end(run, timeout=TIMEOUT)
    assert view.current.status == "cancelled"
    assert len(fake.calls("tasks/cancel")) == 1
    (note,) = [e.data for e in await ops.history(run) if e.type == "remote_cancel"]
    assert (note["outcome"], note["code"]) == ("refused", -32603)


async def test_a_remote_name_unknown_at_run_time_fails_the_call(
    start: Start, db: asyncpg.Pool
) -> None:
    """A computed name is checked when called: UnknownRemote, recorded like any ending."""
    fake = FakeRemote({})
    out = await _run(start, db, _app(), fake, remote="nowhere")
    assert out["error"] == "UnknownRemote"
    assert fake.seen == []


async def test_each_request_is_counted_by_remote_method_and_outcome(
    start: Start, db: asyncpg.Pool
) -> None:
    before = metrics.REMOTE_REQUESTS.labels("peer", "tasks/get", "ok")._value.get()
    ended = metrics.REMOTE_CALLS_ENDED.labels("peer", "completed")._value.get()
    fake = FakeRemote({"tools/call": [CREATED], "tasks/get": [completed(1)]})
    await _run(start, db, _app(), fake)
    after = metrics.REMOTE_REQUESTS.labels("peer", "tasks/get", "ok")._value.get()
    assert after - before == len(fake.calls("tasks/get"))
    assert metrics.REMOTE_CALLS_ENDED.labels("peer", "completed")._value.get() == ended + 1


async def test_each_request_is_a_client_span_whose_traceparent_the_remote_receives(
    start: Start, db: asyncpg.Pool, spans: Any
) -> None:
    """The remote gets our W3C traceparent (header and `_meta`): its work joins our trace,
    under the span of the request, itself under the run's attempt."""
    fake = FakeRemote({"tools/call": [CREATED], "tasks/get": [completed(1)]})
    await _run(start, db, _app(), fake)
    finished = {s.name: s for s in spans.get_finished_spans()}
    create = finished["tether.remote tools/call"]
    context = create.get_span_context()
    sent = fake.headers("tools/call")[0]["traceparent"]
    assert sent.startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")
    assert fake.calls("tools/call")[0]["_meta"]["traceparent"] == sent
    assert create.attributes is not None and create.attributes["tether.remote"] == "peer"
    attempt = next(s for s in spans.get_finished_spans() if s.name.startswith("tether.run"))
    assert create.parent is not None and create.context.trace_id == attempt.context.trace_id


async def test_the_test_kit_crashes_a_call_between_the_create_and_its_record() -> None:
    """`crash_at("remote:<remote>/<tool>", when="after")`: the worker dies once the remote
    created the task, before its id was recorded; the replay sends the same create again,
    under the same key (a remote that honours it returns the same task)."""
    fake = FakeRemote({"tools/call": [CREATED], "tasks/get": [completed("done")]})
    with fake.mounted(URL):
        async with WorkflowEnvironment(_app()) as env:
            crash = env.crash_at("remote:peer/work", when="after")
            run = await env.start("relay", {})
            assert await env.result(run) == {"value": "done"}
    assert crash.count == 1
    keys = [h["idempotency-key"] for h in fake.headers("tools/call")]
    assert len(keys) == 2 and len(set(keys)) == 1


def _asking(fake: FakeRemote) -> Callable[[dict[str, Any]], Any]:
    """tasks/get: input_required (one question, key `q1`) until an update answers it, then
    completed with a greeting for the name answered."""

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        updates = fake.calls("tasks/update")
        if not updates:
            form = {"type": "object", "properties": {"name": {"type": "string"}}}
            request = {
                "method": "elicitation/create",
                "params": {"mode": "form", "message": "Name?", "requestedSchema": form},
            }
            return task("input_required", inputRequests={"q1": request}, pollIntervalMs=20)
        content = updates[-1]["inputResponses"]["q1"]["content"]
        return completed(f"hello {content['name']}")

    return answer


async def test_an_answer_is_recorded_before_it_is_sent_and_a_crash_repeats_at_most_the_send() -> (
    None
):
    """The worker dies once the update was sent, before it was marked sent: the replay sends
    it again under the remote's same key (which the remote ignores once answered); the
    person's answer was taken once."""
    fake = FakeRemote({"tools/call": [CREATED], "tasks/update": [{"resultType": "complete"}]})
    fake.script["tasks/get"] = [_asking(fake)]
    with fake.mounted(URL):
        async with WorkflowEnvironment(_app()) as env:
            crash = env.crash_at("remote:peer/work:answer", when="after")
            run = await env.start("relay", {})
            (wait,) = await env.wait_until_waiting(run)
            assert wait.kind == "remote_input"
            await env.answer(run, wait.key, {"name": "Ada"})
            assert await env.result(run) == {"value": "hello Ada"}
            history = await env.history(run)
    assert crash.count == 1
    updates = fake.calls("tasks/update")
    assert [u["inputResponses"] for u in updates] == [
        {"q1": {"action": "accept", "content": {"name": "Ada"}}}
    ] * 2
    assert [e.type for e in history].count("answer") == 1
    assert [e.data["keys"] for e in history if e.type == "remote_answered"] == [[wait.key]]


FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
ASKED_FIRST: dict[str, Any] = {
    "resultType": "input_required",
    "inputRequests": {
        "q": {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "Go ahead?", "requestedSchema": FORM},
        }
    },
    "requestState": "s1",
}


def _asks_first(body: dict[str, Any]) -> dict[str, Any]:
    """tools/call: asks first; creates the task once the create carries the answer."""
    return CREATED if "inputResponses" in body["params"] else ASKED_FIRST


async def test_a_question_asked_before_the_task_is_a_wait_whose_answer_goes_with_the_create() -> (
    None
):
    """Spec (MRTR): the create is sent again with `inputResponses` and the `requestState`;
    ours: the question is a `remote_input` wait of the run, and the create carrying its
    answer has a key of its own, the same when a crash repeats it (one task)."""
    fake = FakeRemote({"tools/call": [_asks_first], "tasks/get": [completed("done")]})
    with fake.mounted(URL):
        async with WorkflowEnvironment(_app()) as env:
            run = await env.start("relay", {})
            (wait,) = await env.wait_until_waiting(run)
            assert wait.kind == "remote_input"
            crash = env.crash_at("remote:peer/work", when="after")
            await env.answer(run, wait.key, {"ok": True})
            assert await env.result(run) == {"value": "done"}
            history = await env.history(run)
    assert crash.count == 1
    calls = fake.calls("tools/call")
    answered = {"q": {"action": "accept", "content": {"ok": True}}}
    assert [c.get("inputResponses") for c in calls] == [None, answered, answered]
    assert [c.get("requestState") for c in calls] == [None, "s1", "s1"]
    first, again, repeated = (h["idempotency-key"] for h in fake.headers("tools/call"))
    assert again == repeated != first
    assert [e.data["keys"] for e in history if e.type == "remote_answered"] == [[wait.key]]
    assert fake.calls("tasks/update") == []


async def test_a_remote_that_keeps_asking_before_any_task_fails_the_call(
    start: Start, db: asyncpg.Pool
) -> None:
    """Our choice: rounds asked with no question (only state to echo) go again at once, up
    to a bound; past it the call fails RemoteProtocolError."""
    only_state = {"resultType": "input_required", "requestState": "again"}
    fake = FakeRemote({"tools/call": [only_state]})
    out = await _run(start, db, _app(), fake)
    assert out["error"] == "RemoteProtocolError"
    assert len(fake.calls("tools/call")) == 1 + MAX_ROUNDS  # the first, then one per round
