"""A2A as a remote protocol: the pure mapping of A2A tasks onto the remote call (states,
questions, replies, endings), the JSON-RPC facts agreeing with the A2A SDK's server, and the
durable call against a scripted agent (respx on the outbound client) and a real database:
retries under one messageId, refusals, a lost task, a reply sent once across a crash."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import asyncpg
import httpx
import pytest
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    SendMessageResponse,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.constants import VERSION_HEADER
from google.protobuf import json_format
from pydantic import BaseModel

from tests.runtime.conftest import Start
from tests.runtime.remote.fake import FakeRemote, rpc_error, run_completed
from tether.runtime.context import Context
from tether.runtime.policy import RetryPolicy
from tether.runtime.registry import App
from tether.runtime.remote import a2a
from tether.runtime.remote.errors import (
    RemoteCancelled,
    RemoteError,
    RemoteProtocolError,
    RemoteRejected,
)
from tether.testing import WorkflowEnvironment

pytestmark = pytest.mark.postgres

URL = "http://agent.test/"
TASK = "task-1"
TIMEOUT = 20


def _message(text: str, *, message_id: str = "m-agent", data: Any = None) -> Message:
    return Message(role=Role.ROLE_AGENT, message_id=message_id, parts=a2a.parts_of(text, data))


def _task(state: int, *, message: Message | None = None, artifacts: Any = ()) -> Task:
    status = TaskStatus(state=state)  # type: ignore[arg-type]  # an int of the enum
    if message is not None:
        status.message.CopyFrom(message)
    return Task(id=TASK, context_id="ctx", status=status, artifacts=list(artifacts))


def _json(task: Task) -> dict[str, Any]:
    return json_format.MessageToDict(task)


# --- the pure mapping ------------------------------------------------------------------------


def test_submitted_and_working_tasks_are_working() -> None:
    for state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING):
        assert a2a.snapshot_of(_task(state), "agent").status == "working"


def test_an_input_required_task_asks_one_question_keyed_by_its_status_message() -> None:
    """Our choice: the question's key is the agent's status message id (stable while the
    question stands), its form one text field."""
    task = _task(TaskState.TASK_STATE_INPUT_REQUIRED, message=_message("Name?", message_id="q7"))
    snapshot = a2a.snapshot_of(task, "agent")
    assert snapshot.status == "input_required"
    assert [(a.key, a.message, dict(a.schema)) for a in snapshot.asks] == [
        ("q7", "Name?", dict(a2a.REPLY_FORM))
    ]


def test_a_question_without_a_message_id_is_keyed_by_its_time_then_its_words() -> None:
    bare = _task(TaskState.TASK_STATE_INPUT_REQUIRED, message=_message("Name?", message_id=""))
    (ask,) = a2a.snapshot_of(bare, "agent").asks
    assert ask.key == a2a.snapshot_of(bare, "agent").asks[0].key
    assert ask.key.startswith("text-")
    bare.status.timestamp.FromJsonString("2026-08-01T00:00:00Z")
    (timed,) = a2a.snapshot_of(bare, "agent").asks
    assert timed.key == "at-2026-08-01T00:00:00Z"


def test_a_completed_task_returns_its_artifacts_text_and_data() -> None:
    artifacts = [
        Artifact(artifact_id="a1", name="text", parts=[Part(text="one"), Part(text="two")]),
        Artifact(artifact_id="a2", parts=a2a.parts_of("three", {"n": 3})),
    ]
    task = _task(TaskState.TASK_STATE_COMPLETED, message=_message("done"), artifacts=artifacts)
    reply = a2a.outcome_of(a2a.snapshot_of(task, "agent"), "agent")
    assert (reply["text"], reply["data"]) == ("one\ntwo\nthree", [{"n": 3}])
    assert [a["artifactId"] for a in reply["artifacts"]] == ["a1", "a2"]
    assert reply["message"]["parts"] == [{"text": "done"}]


def test_a_completed_task_without_artifacts_returns_its_message() -> None:
    task = _task(TaskState.TASK_STATE_COMPLETED, message=_message("all good", data=[1, 2]))
    reply = a2a.outcome_of(a2a.snapshot_of(task, "agent"), "agent")
    assert (reply["text"], reply["data"], reply["artifacts"]) == ("all good", [[1, 2]], [])


@pytest.mark.parametrize(
    ("state", "error"),
    [
        (TaskState.TASK_STATE_FAILED, RemoteProtocolError),
        (TaskState.TASK_STATE_REJECTED, RemoteRejected),
        (TaskState.TASK_STATE_CANCELED, RemoteCancelled),
    ],
)
def test_an_ended_task_without_success_raises_its_error(
    state: int, error: type[RemoteError]
) -> None:
    snapshot = a2a.snapshot_of(_task(state, message=_message("because")), "agent")
    assert snapshot.ended
    with pytest.raises(error) as caught:
        a2a.outcome_of(snapshot, "agent")
    assert type(caught.value) is error
    assert (str(caught.value), caught.value.remote) == ("because", "agent")


@pytest.mark.parametrize(
    "state", [TaskState.TASK_STATE_AUTH_REQUIRED, TaskState.TASK_STATE_UNSPECIFIED, 99]
)
def test_a_task_state_this_client_cannot_follow_is_refused(state: int) -> None:
    """Our choice: credentials are not relayed through a person's answer."""
    with pytest.raises(RemoteProtocolError):
        a2a.snapshot_of(_task(state), "agent")


def test_a_send_answered_with_a_message_ends_at_once_and_an_ended_task_too() -> None:
    message = SendMessageResponse(message=_message("hi"))
    created = a2a.created_of(message, "agent")
    assert created.task is None and created.snapshot.result["text"] == "hi"
    done = SendMessageResponse(task=_task(TaskState.TASK_STATE_COMPLETED))
    assert a2a.created_of(done, "agent").task is None
    working = a2a.created_of(SendMessageResponse(task=_task(TaskState.TASK_STATE_WORKING)), "a")
    assert working.task == TASK
    with pytest.raises(RemoteProtocolError):
        a2a.created_of(SendMessageResponse(), "agent")


def test_the_methods_named_are_those_the_sdks_server_routes() -> None:
    """The JSON-RPC method names are a copy of A2A's: the SDK's dispatcher routes each."""
    routed = JsonRpcDispatcher.METHOD_TO_MODEL
    assert {a2a.SEND_MESSAGE, a2a.GET_TASK, a2a.CANCEL_TASK} <= set(routed)


def test_reply_ids_are_one_per_task_and_question() -> None:
    assert a2a.reply_id("t", "q") == a2a.reply_id("t", "q")
    assert len({a2a.reply_id("t", "q"), a2a.reply_id("t", "r"), a2a.reply_id("u", "q")}) == 3


# --- the durable call against a scripted agent ------------------------------------------------


class Ask(BaseModel):
    remote: str = "agent"
    message: str = "work"
    data: Any = None


def _app() -> App:
    app = App("asker")
    retry = RetryPolicy(5, 0.01, 2.0, 0.05)
    app.remote("agent", url=URL, protocol="a2a", poll_min=0.02, retry=retry)
    app.remote("tools", url="http://tools.test/mcp", retry=retry)

    @app.workflow
    async def ask(ctx: Context, call: Ask) -> dict[str, Any]:
        try:
            value = await ctx.ask_agent(call.remote, call.message, data=call.data)
        except RemoteError as exc:
            return {"error": type(exc).__name__, "message": str(exc), **exc.extra()}
        return {"value": value}

    return app


def _sent(task: Task) -> dict[str, Any]:
    return json_format.MessageToDict(SendMessageResponse(task=task))


WORKING = _sent(_task(TaskState.TASK_STATE_WORKING))
DONE = _json(_task(TaskState.TASK_STATE_COMPLETED, message=_message("done")))


async def _run(start: Start, db: asyncpg.Pool, fake: FakeRemote, **call: Any) -> Any:
    return await run_completed(start, db, _app(), fake, "ask", call, url=URL, timeout=TIMEOUT)


async def test_a_send_answered_503_is_retried_under_the_same_message_id(
    start: Start, db: asyncpg.Pool, spans: Any
) -> None:
    """Transient failures are retried with backoff; every try is the same message (its id
    and context derived from the call), names A2A's version and carries our traceparent."""
    fake = FakeRemote(
        {
            a2a.SEND_MESSAGE: [httpx.Response(503), httpx.ConnectError("down"), WORKING],
            a2a.GET_TASK: [DONE],
        }
    )
    out = await _run(start, db, fake, data={"k": "v"})
    assert out["value"]["text"] == "done"
    sends = fake.calls(a2a.SEND_MESSAGE)
    assert len(sends) == 3 and all(s == sends[0] for s in sends)
    message = sends[0]["message"]
    assert message["messageId"].startswith("tether-")
    assert message["contextId"] == a2a.context_id(message["messageId"])
    assert message["parts"] == [{"text": "work"}, {"data": {"k": "v"}}]
    assert sends[0]["configuration"] == {"returnImmediately": True, "historyLength": 0}
    assert {h[VERSION_HEADER] for _, _, h in fake.seen} == {a2a.VERSION}
    assert "_meta" not in sends[0]
    sent = fake.headers(a2a.SEND_MESSAGE)[-1]["traceparent"]
    finished = [s for s in spans.get_finished_spans() if s.name == "tether.remote SendMessage"]
    context = finished[-1].get_span_context()
    assert sent.startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")


async def test_a_refused_send_is_not_retried(start: Start, db: asyncpg.Pool) -> None:
    """A JSON-RPC error (the SDK's ContentTypeNotSupportedError, -32005) ends the call."""
    fake = FakeRemote({a2a.SEND_MESSAGE: [rpc_error(-32005, "Incompatible content types")]})
    out = await _run(start, db, fake)
    assert (out["error"], out["code"]) == ("RemoteProtocolError", -32005)
    assert len(fake.calls(a2a.SEND_MESSAGE)) == 1


async def test_a_task_the_agent_no_longer_knows_is_lost(start: Start, db: asyncpg.Pool) -> None:
    fake = FakeRemote(
        {
            a2a.SEND_MESSAGE: [WORKING],
            a2a.GET_TASK: [rpc_error(a2a.TASK_NOT_FOUND, "Task not found")],
        }
    )
    out = await _run(start, db, fake)
    assert out["error"] == "RemoteTaskLost"


async def test_a_task_asking_for_authentication_fails_the_call(
    start: Start, db: asyncpg.Pool
) -> None:
    auth = _json(_task(TaskState.TASK_STATE_AUTH_REQUIRED))
    fake = FakeRemote({a2a.SEND_MESSAGE: [WORKING], a2a.GET_TASK: [auth]})
    out = await _run(start, db, fake)
    assert out["error"] == "RemoteProtocolError"
    assert "authentication" in out["message"]


async def test_asking_an_mcp_server_or_calling_an_agents_tool_is_an_unknown_remote(
    start: Start, db: asyncpg.Pool
) -> None:
    """A computed name is checked when called: the remote must be an agent (nothing sent)."""
    fake = FakeRemote({})
    out = await _run(start, db, fake, remote="tools")
    assert out["error"] == "UnknownRemote"
    assert "not an A2A agent" in out["message"]
    assert fake.seen == []


@pytest.mark.parametrize(
    ("call", "said"),
    [({"data": [1, 2]}, "data must be a JSON object"), ({"message": " "}, "must not be blank")],
)
async def test_a_blank_message_or_data_that_is_not_a_json_object_is_refused_unsent(
    call: dict[str, Any], said: str
) -> None:
    fake = FakeRemote({})
    with fake.mounted(URL):
        async with WorkflowEnvironment(_app()) as env:
            run = await env.start("ask", call)
            with pytest.raises(Exception, match=said):
                await env.result(run)
    assert fake.seen == []


def _asking(fake: FakeRemote) -> Callable[[dict[str, Any]], Any]:
    """GetTask: input-required (status message `q1`) until a reply message came, then
    completed with a greeting for the reply."""

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        replies = [s for s in fake.calls(a2a.SEND_MESSAGE) if s["message"].get("taskId")]
        if not replies:
            question = _message("Name?", message_id="q1")
            return _json(_task(TaskState.TASK_STATE_INPUT_REQUIRED, message=question))
        name = replies[-1]["message"]["parts"][0]["text"]
        artifact = Artifact(artifact_id="g", parts=[Part(text=f"hello {name}")])
        return _json(_task(TaskState.TASK_STATE_COMPLETED, artifacts=[artifact]))

    return answer


async def test_a_reply_is_sent_once_even_when_the_worker_dies_after_sending_it() -> None:
    """The worker dies once the reply was sent, before it was marked sent: the replay finds
    the task no longer asking that question and does not send it again; the person's answer
    was taken once. The reply names the task, its context and an id derived from both."""
    fake = FakeRemote({a2a.SEND_MESSAGE: [WORKING]})
    fake.script[a2a.GET_TASK] = [_asking(fake)]
    with fake.mounted(URL):
        async with WorkflowEnvironment(_app()) as env:
            crash = env.crash_at("remote:agent:answer", when="after")
            run = await env.start("ask", {})
            (wait,) = await env.wait_until_waiting(run)
            assert (wait.kind, wait.prompt) == ("remote_input", "Name?")
            await env.answer(run, wait.key, {"reply": "Ada"})
            out = await env.result(run)
            history = await env.history(run)
    assert crash.count == 1
    assert out["value"]["text"] == "hello Ada"
    replies = [s["message"] for s in fake.calls(a2a.SEND_MESSAGE) if s["message"].get("taskId")]
    assert replies == [
        {
            "messageId": a2a.reply_id(TASK, "q1"),
            "contextId": "ctx",
            "taskId": TASK,
            "role": "ROLE_USER",
            "parts": [{"text": "Ada"}],
        }
    ]
    assert [e.type for e in history].count("answer") == 1
    assert [e.data["keys"] for e in history if e.type == "remote_answered"] == [[wait.key]]
