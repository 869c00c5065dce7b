"""The parts of `subscriptions/listen` below the HTTP layer: a subscriber that takes no frame
is dropped (never buffered without bound), the change hub wakes only the watchers of an id,
a reconnect wakes everyone, and a change while a first view is read is not lost. Our
choice."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

import pytest
from prometheus_client import REGISTRY
from pydantic import BaseModel

from tether.jsonrpc import codes
from tether.jsonrpc.errors import LimitReached
from tether.jsonrpc.headers import Route
from tether.jsonrpc.router import RequestContext, Router
from tether.mcp.subscriptions import Limits, Subscriptions, view_key
from tether.runtime.changes import ChangeHub
from tether.runtime.context import Context
from tether.runtime.operations import Operations
from tether.runtime.registry import App
from tether.storage.notify import CHANGE_CHANNEL


class FakeListener:
    """Only the subscribe half of the listener: the hub's one subscription."""

    def __init__(self) -> None:
        self.callbacks: list[Any] = []
        self.ready = asyncio.Event()

    def subscribe(self, channel: str, callback: Any) -> Any:
        assert channel == CHANGE_CHANNEL
        self.callbacks.append(callback)
        return lambda: self.callbacks.remove(callback)

    def fire(self, payload: str) -> None:
        for cb in list(self.callbacks):
            cb(CHANGE_CHANNEL, payload)


async def test_a_subscriber_that_takes_no_frame_is_dropped_with_a_clear_error() -> None:
    stuck = asyncio.Event()

    async def never(_method: str, _params: dict[str, Any]) -> None:
        await stuck.wait()

    subs = Subscriptions(
        Router(), cast(Operations, None), ChangeHub(None), limits=Limits(send_timeout_s=0.05)
    )
    ctx = RequestContext("subscriptions/listen", {}, Route("modern", "2026-07-28"), {}, 9)
    ctx.notify = never
    dropped = ("tether_subscriptions_dropped_total", {"reason": "slow_client"})
    before = REGISTRY.get_sample_value(*dropped) or 0.0
    with pytest.raises(LimitReached) as caught:
        async with asyncio.timeout(5):
            await subs._send(ctx, "notifications/tasks", {"taskId": "t"})
    assert caught.value.code == codes.LIMIT_REACHED
    assert REGISTRY.get_sample_value(*dropped) == before + 1


def test_the_hub_wakes_only_the_watchers_of_an_id_and_everyone_on_reconnect() -> None:
    listener = FakeListener()
    hub = ChangeHub(cast(Any, listener))
    woken: list[tuple[str, str]] = []
    a = lambda i: woken.append(("a", i))  # noqa: E731
    b = lambda i: woken.append(("b", i))  # noqa: E731
    hub.watch(a, ["x", "y"])
    hub.watch(b, ["y"])
    listener.fire("x")
    listener.fire("z")
    assert woken == [("a", "x")]
    woken.clear()
    listener.fire("")  # the listener reconnected: anything may have changed
    assert sorted(woken) == [("a", ""), ("b", "")]
    hub.leave(a, ["x", "y"])
    woken.clear()
    listener.fire("x")
    listener.fire("y")
    assert woken == [("b", "y")] and hub.watched_ids == 1
    hub.close()
    assert listener.callbacks == []


def test_only_the_view_fields_decide_whether_a_task_changed() -> None:
    base = {"taskId": "t", "status": "working", "lastUpdatedAt": "1"}
    assert view_key(base) == view_key({**base, "lastUpdatedAt": "2"})
    assert view_key(base) != view_key({**base, "statusMessage": "step 2"})
    assert view_key(base) != view_key({**base, "status": "completed", "result": {}})


class _NoArgs(BaseModel):
    pass


@pytest.mark.postgres
async def test_a_change_notified_while_the_first_view_is_read_is_reported(db: Any) -> None:
    """A run that changes while listen reads its first view (after its id is watched, before
    the stream keeps the task) is looked at again: the newer view follows the first. Before,
    that wake found no task to mark, and a run that then stayed parked was never reported
    again."""
    app = App()

    @app.workflow()
    async def parks(ctx: Context, args: _NoArgs) -> None:
        return None

    ops = Operations(db, app)
    run_id = (await ops.start("parks", {})).execution.id
    listener = FakeListener()
    reads: list[str] = []

    async def tasks_get(ctx: RequestContext) -> dict[str, Any]:
        reads.append(ctx.params["taskId"])
        if len(reads) == 1:
            listener.fire(run_id)  # the worker parked the run while this read was under way
            return {"taskId": run_id, "status": "working", "statusMessage": "starting"}
        return {"taskId": run_id, "status": "input_required", "statusMessage": "parked"}

    router = Router()
    router.add("tasks/get", tasks_get)
    subs = Subscriptions(router, ops, ChangeHub(cast(Any, listener)))
    sent: list[tuple[str, Any]] = []
    parked = asyncio.Event()

    async def notify(method: str, params: dict[str, Any]) -> None:
        sent.append((method, params.get("statusMessage")))
        if params.get("statusMessage") == "parked":
            parked.set()

    caps: dict[str, Any] = {"extensions": {codes.TASKS_EXTENSION: {}}}
    ctx = RequestContext(
        "subscriptions/listen",
        {"notifications": {"taskIds": [run_id]}},
        Route("modern", codes.MODERN_VERSION, capabilities=caps),
        {},
        9,
        notify=notify,
        streaming=True,
    )
    listening = asyncio.create_task(subs.listen(ctx))
    try:
        async with asyncio.timeout(5):
            await parked.wait()
    finally:
        listening.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listening
    assert [message for _, message in sent] == [None, "starting", "parked"]
