"""The parts of `subscriptions/listen` that need no database: a subscriber that takes no frame
is dropped (never buffered without bound), the change hub wakes only the watchers of an id,
and a reconnect wakes everyone. Our choice."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from prometheus_client import REGISTRY

from tether.jsonrpc import codes
from tether.jsonrpc.errors import LimitReached
from tether.jsonrpc.headers import Route
from tether.jsonrpc.router import RequestContext, Router
from tether.mcp.subscriptions import Limits, Subscriptions, view_key
from tether.runtime.changes import ChangeHub
from tether.runtime.operations import Operations
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
