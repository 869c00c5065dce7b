"""The follower of remote task streams, against a remote scripted with respx whose
`subscriptions/listen` streams the test feeds frame by frame: a pushed view the run has not
seen makes its poll due now, one it has seen does not, an ended task is forgotten; a task the
remote does not agree to follow is polled only; a remote over its id limit gets fewer; a remote
without the method is not asked again soon; a stream that drops is opened again. Spec:
2026-07-28 subscriptions/listen (acknowledgement first), ext-tasks `notifications/tasks`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import respx

from tests.runtime.remote.fake import URL, task
from tether.runtime.remote import spec
from tether.runtime.remote.clients import Clients, Waiting
from tether.runtime.remote.config import Remote
from tether.runtime.remote.errors import RemoteProtocolError, Transient
from tether.runtime.remote.follow import Follower, FollowSettings, NotOffered, Pause, pause_after

FAST = FollowSettings(reopen_min_s=0.0, retry_min_s=0.01, retry_max_s=0.05)
PEER = Remote("peer", URL)


@dataclass
class Listen:
    """One listen request the remote received, and the frames it sends back on it."""

    ids: list[str]
    frames: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)

    def send(self, method: str, params: dict[str, Any]) -> None:
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        self.frames.put_nowait(b"data: " + json.dumps(message).encode() + b"\n\n")

    def ack(self, ids: list[str] | None = None) -> None:
        agreed = self.ids if ids is None else ids
        self.send(spec.LISTEN_ACKNOWLEDGED, {"notifications": {"taskIds": agreed}})

    def view(self, task_id: str, status: str, **extra: Any) -> None:
        view = {**task(status, **extra), "taskId": task_id}
        view.pop("resultType")
        self.send(spec.TASK_NOTIFICATION, view)

    def close(self) -> None:
        self.frames.put_nowait(None)


@dataclass
class Streams:
    """The remote: each listen request is queued (`opened`) and streams what the test sends;
    `answer`, when set, answers the next request instead."""

    opened: asyncio.Queue[Listen] = field(default_factory=asyncio.Queue)
    answer: Callable[[dict[str, Any]], httpx.Response] | None = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert body["method"] == spec.LISTEN
        assert request.headers["mcp-method"] == spec.LISTEN
        caps = body["params"]["_meta"][spec.META_CLIENT_CAPABILITIES]
        assert spec.TASKS in caps["extensions"]
        if self.answer is not None:
            answer, self.answer = self.answer, None
            return answer(body)
        listen = Listen(body["params"]["notifications"]["taskIds"])
        self.opened.put_nowait(listen)

        async def frames() -> AsyncIterator[bytes]:
            while (frame := await listen.frames.get()) is not None:
                yield frame

        return httpx.Response(200, headers={"content-type": spec.SSE}, content=frames())

    async def next(self) -> Listen:
        async with asyncio.timeout(5):
            return await self.opened.get()


@dataclass
class Pokes:
    seen: asyncio.Queue[tuple[str, int]] = field(default_factory=asyncio.Queue)

    def __call__(self, execution_id: str, seq: int) -> None:
        self.seen.put_nowait((execution_id, seq))

    async def next(self) -> tuple[str, int]:
        async with asyncio.timeout(5):
            return await self.seen.get()


@pytest.fixture
async def streams() -> AsyncIterator[Streams]:
    found = Streams()
    with respx.mock(assert_all_called=False) as mock:
        mock.post(URL).mock(side_effect=found)
        yield found


@pytest.fixture
def pokes() -> Pokes:
    return Pokes()


async def _following(
    pokes: Pokes, settings: FollowSettings = FAST
) -> AsyncIterator[tuple[Follower, Clients]]:
    clients = Clients()
    follower = Follower({"peer": PEER}, clients, pokes, settings)
    running = asyncio.create_task(follower.run())
    try:
        yield follower, clients
    finally:
        follower.stop()
        async with asyncio.timeout(5):
            await running
        await clients.aclose()


@pytest.fixture
async def follower(pokes: Pokes) -> AsyncIterator[Follower]:
    async for found, _ in _following(pokes):
        yield found


def _waiting(task_id: str, seq: int = 1, seen: str = "working:") -> Waiting:
    return Waiting("peer", task_id, "ex_1", seq, seen)


async def _covers(follower: Follower, *tasks: str) -> None:
    async with asyncio.timeout(5):
        while True:
            if follower.covered("peer") == frozenset(tasks):
                return
            await asyncio.sleep(0.005)


async def test_a_view_the_run_has_not_seen_makes_its_poll_due_and_one_it_has_does_not(
    follower: Follower, streams: Streams, pokes: Pokes
) -> None:
    """Our choice: only a change of status or questions (the digest) pokes the poller; the
    unchanged view every stream repeats on opening costs nothing."""
    follower.follow(_waiting("tk_a", seq=3))
    listen = await streams.next()
    assert listen.ids == ["tk_a"]
    listen.ack()
    listen.view("tk_a", "working")  # what the run saw
    listen.view("tk_a", "input_required", inputRequests={})
    assert await pokes.next() == ("ex_1", 3)
    assert follower.pokes == 1
    listen.view("tk_a", "input_required", inputRequests={})  # the same again: nothing
    listen.view("tk_a", "completed", result={"content": []})
    assert await pokes.next() == ("ex_1", 3)
    assert follower.pokes == 2


async def test_a_run_parking_again_on_what_it_read_before_a_pushed_view_is_polled_once_more(
    follower: Follower, streams: Streams, pokes: Pokes
) -> None:
    """Our choice: the run's poll may predate the view the stream told (it polled, the task
    changed, then it parked): one more poll settles which is the latest, and only one."""
    follower.follow(_waiting("tk_a", seq=1))
    listen = await streams.next()
    listen.ack()
    listen.view("tk_a", "input_required", inputRequests={})
    assert await pokes.next() == ("ex_1", 1)
    follower.follow(_waiting("tk_a", seq=1))  # parks again having seen `working`
    assert pokes.seen.get_nowait() == ("ex_1", 1)
    follower.follow(_waiting("tk_a", seq=1))  # the poll found it `working` after all
    assert pokes.seen.empty()
    listen.view("tk_a", "input_required", inputRequests={})  # the stream says it again
    assert await pokes.next() == ("ex_1", 1)
    assert follower.pokes == 3


async def test_an_ended_task_is_forgotten_and_a_new_task_opens_a_stream_over_both(
    follower: Follower, streams: Streams, pokes: Pokes
) -> None:
    """Our choice: the set a stream covers is fixed when it opens; a new task opens a new
    stream over the whole set, and the old one is closed once the new one is acknowledged."""
    follower.follow(_waiting("tk_a", seq=1))
    first = await streams.next()
    first.ack()
    await _covers(follower, "tk_a")
    follower.follow(_waiting("tk_b", seq=2))
    second = await streams.next()
    assert second.ids == ["tk_a", "tk_b"]
    second.ack()
    await _covers(follower, "tk_a", "tk_b")
    second.view("tk_b", "completed", result={"content": []})
    assert await pokes.next() == ("ex_1", 2)
    follower.follow(_waiting("tk_c", seq=3))
    third = await streams.next()
    assert third.ids == ["tk_a", "tk_c"]  # tk_b ended: forgotten


async def test_a_forgotten_task_is_not_acted_on(
    follower: Follower, streams: Streams, pokes: Pokes
) -> None:
    """The poller dropped its poll (the call or the run ended): its views change nothing."""
    follower.follow(_waiting("tk_a", seq=1))
    follower.follow(_waiting("tk_b", seq=2))
    listen = await streams.next()
    listen.ack()
    follower.forget("ex_1", 1)
    assert follower.watched("peer") == {"tk_b"}
    listen.view("tk_a", "completed", result={"content": []})
    listen.view("tk_b", "completed", result={"content": []})
    assert await pokes.next() == ("ex_1", 2)  # tk_a's view came first, and poked nothing
    assert follower.pokes == 1


async def test_a_task_the_remote_does_not_agree_to_follow_is_polled_only(
    follower: Follower, streams: Streams, pokes: Pokes
) -> None:
    """Spec: the acknowledgement lists the ids the server agreed to cover; the others are
    not asked for again (no loop of reopens), and views of them are not acted on."""
    follower.follow(_waiting("tk_a", seq=1))
    follower.follow(_waiting("tk_b", seq=2))
    listen = await streams.next()
    listen.ack(["tk_b"])
    await _covers(follower, "tk_b")
    follower.follow(_waiting("tk_c", seq=3))
    again = await streams.next()
    assert again.ids == ["tk_b", "tk_c"]


async def test_a_remote_over_its_id_limit_is_asked_again_at_once_for_fewer(
    follower: Follower, streams: Streams
) -> None:
    """Tether answers -32602 with `data.max`; the follower keeps to that limit."""

    def over(body: dict[str, Any]) -> httpx.Response:
        error = {"code": -32602, "message": "too many", "data": {"max": 1, "requested": 2}}
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "error": error})

    streams.answer = over
    follower.follow(_waiting("tk_a", seq=1))
    follower.follow(_waiting("tk_b", seq=2))
    listen = await streams.next()
    assert listen.ids == ["tk_a"]


async def test_a_remote_without_listen_is_asked_again_after_its_pause(
    pokes: Pokes, streams: Streams
) -> None:
    """Spec: a method a server does not serve is -32601 (404): the tasks are polled, and the
    remote is asked again after `unsupported_s` (short here)."""

    def missing(body: dict[str, Any]) -> httpx.Response:
        error = {"code": -32601, "message": "Method not found"}
        return httpx.Response(404, json={"jsonrpc": "2.0", "id": body["id"], "error": error})

    streams.answer = missing
    settings = FollowSettings(reopen_min_s=0.0, unsupported_s=0.2)
    async for follower, _ in _following(pokes, settings):
        follower.follow(_waiting("tk_a", seq=1))
        listen = await streams.next()
        assert follower.opened == 0
        listen.ack()
        await _covers(follower, "tk_a")
        assert follower.opened == 1


SETTINGS = FollowSettings(retry_min_s=1.0, retry_max_s=8.0, unsupported_s=3600.0)


def _refusal(code: int, data: Any = None) -> RemoteProtocolError:
    return RemoteProtocolError("refused", remote="peer", code=code, data=data)


@pytest.mark.parametrize(
    ("error", "failures", "pause"),
    [
        (Transient("down"), 0, Pause(1.0, failed=True)),
        (Transient("down"), 2, Pause(4.0, failed=True)),
        (Transient("down"), 9, Pause(8.0, failed=True)),
        (None, 0, Pause(1.0, failed=True)),
        (_refusal(-32601), 0, Pause(3600.0, refused=True)),
        (_refusal(-32021), 0, Pause(3600.0, refused=True)),
        (NotOffered(), 0, Pause(3600.0, refused=True)),
        (_refusal(-32602, {"max": 2}), 0, Pause(0.0, cap=2)),
        (_refusal(-32602, {"max": 5}), 0, Pause(3600.0, refused=True)),
        (_refusal(-32602), 0, Pause(3600.0, refused=True)),
    ],
    ids=[
        "transient",
        "backoff",
        "bounded",
        "no-ack",
        "no-method",
        "other-refusal",
        "no-task-notifications",
        "over-limit",
        "limit-not-passed",
        "invalid",
    ],
)
def test_the_pause_before_a_stream_is_opened_again(
    error: BaseException | None, failures: int, pause: Pause
) -> None:
    """Our choice: a transport failure backs off (doubling, bounded); a refusal waits
    `unsupported_s` (asked again at once it would be refused again); a remote over its id
    limit is asked again at once for fewer (never when it was not over it: no loop)."""
    assert pause_after(error, 4, failures, SETTINGS) == pause


async def test_a_stream_that_drops_is_opened_again_over_the_same_tasks(
    follower: Follower, streams: Streams, pokes: Pokes
) -> None:
    """Our choice: a drop costs latency only; after its backoff the stream is opened again,
    and the view it sends first is acted on if the run has not seen it."""
    follower.follow(_waiting("tk_a", seq=1))
    first = await streams.next()
    first.ack()
    await _covers(follower, "tk_a")
    first.close()  # ends without the listen result: a drop
    second = await streams.next()
    assert second.ids == ["tk_a"]
    second.ack()
    second.view("tk_a", "completed", result={"content": []})
    assert await pokes.next() == ("ex_1", 1)
    assert follower.opened == 2


async def test_a_remote_not_followed_or_not_speaking_tasks_opens_no_stream(
    pokes: Pokes, streams: Streams
) -> None:
    """Our choice: `listen=False`, another protocol, or an unknown remote: polled only."""
    remotes = {
        "quiet": Remote("quiet", URL, listen=False),
        "plain": Remote("plain", URL, protocol="mcp"),
    }
    clients = Clients()
    follower = Follower(remotes, clients, pokes, FAST)
    for name in ("quiet", "plain", "nobody"):
        follower.follow(Waiting(name, "tk_a", "ex_1", 1, "working:"))
    assert follower._feeds == {}
