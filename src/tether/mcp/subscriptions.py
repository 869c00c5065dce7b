"""`subscriptions/listen`: pushed task views (`notifications/tasks`) and resource updates over
one SSE stream, with no polling anywhere.

Agreement. `notifications.taskIds` needs the Tasks extension declared on the request (-32021
otherwise); each id is agreed when `tasks/get` for it, with the listener's own request
context, authorization and scoping, succeeds (an unknown or foreign id is left out of the ack,
as `tasks/get` would refuse it). `notifications.resourceSubscriptions` URIs are agreed when a
registered resolver claims them (runtime/resource_watches.py) and `resources/read` of the URI
succeeds for this caller. `toolsListChanged` is agreed when the server's tool list can change
while it runs (`tether serve --dags DIR`: DAG files come and go; tools/live.py); the prompt and
resource list kinds are never agreed (those lists do not change while it runs).

Stream. First `notifications/subscriptions/acknowledged` with what was agreed, then the current
view of every agreed task (a client that re-listens after a drop loses nothing), then one
frame per change of a task's view (status, statusMessage, inputRequests, result, error) —
each the `DetailedTask` `tasks/get` returns at that moment, computed from the row, without
`resultType`, with `_meta` naming the subscription. A task whose view is terminal sends that
view once and is dropped from the stream; a change of the tool list is one
`notifications/tools/list_changed` (changes close together may share one); when nothing
agreed is left to watch (an agreed `toolsListChanged` is never done) the stream ends with the
listen result (the graceful close of the core schema). Changes arrive through
the process's one change hub (runtime/changes.py), fed by the one LISTEN connection, so a
change written by any server or worker process reaches every subscriber.

Limits. At most `max_subscriptions` open streams per principal on one server, at most
`max_ids` ids and URIs per stream (-31010 / -32602 otherwise). The stream's queue is bounded
(jsonrpc/http.py); a client that takes no frame for `send_timeout_s` is dropped. Pending work
is a set of dirty ids, never a queue of frames, so a slow client costs at most one view per id.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

from tether.jsonrpc import codes
from tether.jsonrpc.errors import (
    InvalidParams,
    InvalidRequest,
    JsonRpcError,
    LimitReached,
    Unavailable,
    tasks_capability_required,
)
from tether.jsonrpc.router import RequestContext, Router, parse_params
from tether.mcp.server import RUN_URI
from tether.observability import metrics
from tether.runtime import errors as runtime_errors
from tether.runtime.changes import ChangeHub
from tether.runtime.operations import Operations
from tether.runtime.resource_watches import Counts, ResourceWatches
from tether.runtime.rows import ExecutionRow

logger = logging.getLogger(__name__)

RESOURCE_UPDATED: Final = "notifications/resources/updated"
TOOLS_CHANGED: Final = "notifications/tools/list_changed"
#: The parts of a task view whose change is worth a frame (lastUpdatedAt alone is not).
VIEW_FIELDS: Final = ("status", "statusMessage", "inputRequests", "result", "error")

Authorize = Callable[[RequestContext], None]
# Calls its argument whenever tools/list changes; returns the function that stops it.
WatchTools = Callable[[Callable[[], None]], Callable[[], None]]


class Filter(BaseModel):
    model_config = ConfigDict(extra="allow")  # kinds of later revisions: not agreed
    taskIds: list[str] | None = None
    resourceSubscriptions: list[str] | None = None
    toolsListChanged: bool | None = None
    promptsListChanged: bool | None = None
    resourcesListChanged: bool | None = None


class ListenParams(BaseModel):
    model_config = ConfigDict(extra="allow")
    notifications: Filter


@dataclass(frozen=True)
class Limits:
    max_subscriptions: int = 32
    max_ids: int = 256
    send_timeout_s: float = 10.0


def view_key(task: dict[str, Any]) -> tuple[Any, ...]:
    """What decides whether a task's view changed."""
    return tuple(task.get(name) for name in VIEW_FIELDS)


@dataclass
class _Feed:
    """One agreed task id or resource URI within one stream."""

    key: str  # the task id or the URI
    execution_id: str  # the id it was asked for (a handle: the chain is followed)
    wake_ids: frozenset[str] = frozenset()
    last: Any = None  # the last view key (tasks) or row (resources) reported
    counts: Counts | None = None  # resources only
    current: ExecutionRow | None = None  # the chain's live run, as last read
    ended: bool = False


@dataclass(eq=False)  # kept in a set: by identity
class _Stream:
    ctx: RequestContext
    tasks: dict[str, _Feed] = field(default_factory=dict)
    resources: dict[str, _Feed] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)  # feed keys to look at again
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    unwatch_tools: Callable[[], None] | None = None  # set while toolsListChanged is agreed
    tools_changed: bool = False  # a tools/list change not yet sent

    def tool_list_changed(self) -> None:
        self.tools_changed = True
        self.changed.set()

    def live(self) -> bool:
        """Whether anything agreed is left to watch."""
        return self.unwatch_tools is not None or any(not f.ended for f in self.feeds())

    def feeds(self) -> list[_Feed]:
        return [*self.tasks.values(), *self.resources.values()]

    def wake(self, execution_id: str) -> None:
        for feed in self.feeds():
            if not feed.ended and (not execution_id or execution_id in feed.wake_ids):
                self.dirty.add(feed.key)
        self.changed.set()


class Subscriptions:
    """The `subscriptions/listen` method over the router's own `tasks/get` and
    `resources/read` (so every view is the one those methods return to this caller)."""

    def __init__(
        self,
        router: Router,
        ops: Operations,
        hub: ChangeHub,
        *,
        watches: ResourceWatches | None = None,
        authorize: Authorize | None = None,
        limits: Limits = Limits(),
        watch_tools: WatchTools | None = None,
    ) -> None:
        self.router = router
        self.ops = ops
        self.hub = hub
        self.watches = watches or ResourceWatches()
        self.authorize = authorize
        self.limits = limits
        self.watch_tools = watch_tools  # None: the tool list never changes while serving
        self.open: Counter[str] = Counter()  # open streams per principal name
        self.streams: set[_Stream] = set()
        metrics.count_subscriptions(self)

    def metric_counts(self) -> metrics.SubscriptionCounts:
        """The open streams and what they follow (the subscription gauges, at scrape time)."""
        tasks = sum(not f.ended for s in self.streams for f in s.tasks.values())
        resources = sum(not f.ended for s in self.streams for f in s.resources.values())
        tools = sum(s.unwatch_tools is not None for s in self.streams)
        return metrics.SubscriptionCounts(
            len(self.streams), (tasks, resources, tools), self.hub.watched_ids
        )

    def register(self, router: Router) -> None:
        router.add(codes.LISTEN, self.listen, always_streams=True)

    async def listen(self, ctx: RequestContext) -> dict[str, Any]:
        wanted = parse_params(ListenParams, ctx.params).notifications
        task_ids = list(dict.fromkeys(wanted.taskIds or ()))
        uris = list(dict.fromkeys(wanted.resourceSubscriptions or ()))
        if wanted.taskIds is not None and not ctx.route.declares_tasks():
            raise tasks_capability_required(f"{codes.LISTEN} for taskIds needs the tasks extension")
        if len(task_ids) + len(uris) > self.limits.max_ids:
            raise InvalidParams(
                f"a subscription covers at most {self.limits.max_ids} task ids and resource URIs",
                {"max": self.limits.max_ids, "requested": len(task_ids) + len(uris)},
            )
        if not ctx.streaming:
            raise InvalidRequest(
                f"{codes.LISTEN} answers with an SSE stream: accept text/event-stream"
            )
        who = ctx.principal_name or "anonymous"
        if self.open[who] >= self.limits.max_subscriptions:
            raise LimitReached(
                f"{who} has {self.open[who]} open subscriptions (the limit); close one first",
                {"max": self.limits.max_subscriptions},
            )
        self.open[who] += 1
        stream = _Stream(ctx)
        self.streams.add(stream)
        try:
            return await self._serve(stream, task_ids, uris, wanted)
        finally:
            self.streams.discard(stream)
            if stream.unwatch_tools is not None:
                stream.unwatch_tools()
            self.hub.leave(stream.wake, {i for f in stream.feeds() for i in f.wake_ids})
            self.open[who] -= 1
            if not self.open[who]:
                del self.open[who]

    async def _serve(
        self, stream: _Stream, task_ids: list[str], uris: list[str], wanted: Filter
    ) -> dict[str, Any]:
        ctx = stream.ctx
        if task_ids and self.authorize is not None:
            # As tasks/get would be: a reader may not follow tasks (it may not poll them).
            self.authorize(dataclasses.replace(ctx, method="tasks/get"))
        self.hub.watch(stream.wake, ())  # from here on, a listener reconnect wakes us
        views = {}
        for task_id in task_ids:
            feed = _Feed(task_id, task_id)
            # Kept before its first read: a change notified during that read marks the task
            # to be looked at again (the read may predate the change).
            stream.tasks[task_id] = feed
            view = await self._agree_task(stream, feed)
            if view is None:
                del stream.tasks[task_id]
            else:
                views[task_id] = view
        for uri in uris:
            await self._agree_resource(stream, uri)
        agreed: dict[str, Any] = {}
        if wanted.taskIds is not None:
            agreed["taskIds"] = list(stream.tasks)
        if wanted.resourceSubscriptions is not None:
            agreed["resourceSubscriptions"] = list(stream.resources)
        if wanted.toolsListChanged and self.watch_tools is not None:
            stream.unwatch_tools = self.watch_tools(stream.tool_list_changed)
            agreed["toolsListChanged"] = True
        await self._send(ctx, codes.LISTEN_ACKNOWLEDGED, {"notifications": agreed})
        for task_id, view in views.items():
            await self._report(stream, stream.tasks[task_id], view)
        while stream.live():
            await stream.changed.wait()
            stream.changed.clear()
            if stream.tools_changed:
                stream.tools_changed = False
                await self._send(ctx, TOOLS_CHANGED, {})
            keys, stream.dirty = stream.dirty, set()
            for key in keys:
                await self._refresh(stream, key)
        return {"_meta": {codes.META_SUBSCRIPTION_ID: ctx.request_id}}

    # --- tasks ----------------------------------------------------------------------------------

    async def _agree_task(self, stream: _Stream, feed: _Feed) -> dict[str, Any] | None:
        """The task's current view, watching its chain first (so no change slips between the
        read and the watch); None when this caller may not see the task."""
        if not await self._follow(stream, feed):
            return None
        try:
            return await self._task_view(stream.ctx, feed.key)
        except JsonRpcError:
            self._unfollow(stream, feed)
            return None

    async def _follow(self, stream: _Stream, feed: _Feed) -> bool:
        """Watch every run of the feed's chain (a change of its live run is a change)."""
        try:
            view = await self.ops.get(feed.execution_id)
        except runtime_errors.ExecutionNotFound:
            return False
        except runtime_errors.Unavailable as exc:
            raise Unavailable("the database is unreachable; retry") from exc
        ids = frozenset(row.id for row in view.chain) | {feed.execution_id}
        self.hub.watch(stream.wake, ids - feed.wake_ids)
        feed.wake_ids = ids
        feed.current = view.current
        return True

    def _unfollow(self, stream: _Stream, feed: _Feed) -> None:
        feed.ended = True
        others = {i for f in stream.feeds() if f is not feed and not f.ended for i in f.wake_ids}
        self.hub.unwatch(stream.wake, feed.wake_ids - others)

    async def _task_view(self, ctx: RequestContext, task_id: str) -> dict[str, Any]:
        """What `tasks/get` returns to this caller for `task_id`, through the router."""
        meta = ctx.params.get("_meta")
        get = dataclasses.replace(
            ctx,
            method="tasks/get",
            params={"taskId": task_id, "_meta": meta},
            streaming=False,
        )
        task = await self.router.dispatch(get)
        task.pop("resultType", None)
        return task

    async def _report(self, stream: _Stream, feed: _Feed, task: dict[str, Any]) -> None:
        key = view_key(task)
        if key == feed.last:
            return
        feed.last = key
        task["_meta"] = {**task.get("_meta", {}), codes.META_SUBSCRIPTION_ID: stream.ctx.request_id}
        await self._send(stream.ctx, codes.TASK_NOTIFICATION, task)
        if task.get("status") in codes.TERMINAL_TASK_STATUSES:
            self._unfollow(stream, feed)

    # --- resources ------------------------------------------------------------------------------

    async def _agree_resource(self, stream: _Stream, uri: str) -> None:
        match = await self.watches.match(uri)
        if match is None:
            return
        execution_id, counts = match
        read = dataclasses.replace(
            stream.ctx,
            method="resources/read",
            params={"uri": uri, "_meta": stream.ctx.params.get("_meta")},
            streaming=False,
        )
        feed = _Feed(uri, execution_id, counts=counts)
        try:
            if self.authorize is not None:
                self.authorize(read)
            await self.router.dispatch(read)
        except JsonRpcError:
            return
        if await self._follow(stream, feed):
            feed.last = feed.current
            stream.resources[uri] = feed

    async def _refresh(self, stream: _Stream, key: str) -> None:
        feed = stream.tasks.get(key) or stream.resources.get(key)
        if feed is None or feed.ended:
            return
        try:
            if not await self._follow(stream, feed):
                self._unfollow(stream, feed)  # the run went away (retention): nothing more
                return
            if feed.counts is None:
                await self._report(stream, feed, await self._task_view(stream.ctx, key))
            else:
                await self._report_resource(stream, feed)
        except Unavailable:
            logger.info("subscription %s: database unreachable; waiting", stream.ctx.request_id)
        except JsonRpcError:
            self._unfollow(stream, feed)  # no longer visible to this caller

    async def _report_resource(self, stream: _Stream, feed: _Feed) -> None:
        row = feed.current
        assert feed.counts is not None and row is not None  # noqa: S101 — a followed resource
        if feed.counts(feed.last, row):
            await self._send(stream.ctx, RESOURCE_UPDATED, {"uri": feed.key})
        feed.last = row
        if not row.live:
            self._unfollow(stream, feed)

    async def _send(self, ctx: RequestContext, method: str, params: dict[str, Any]) -> None:
        if method != codes.TASK_NOTIFICATION:
            params.setdefault("_meta", {})[codes.META_SUBSCRIPTION_ID] = ctx.request_id
        try:
            async with asyncio.timeout(self.limits.send_timeout_s):
                await ctx.notify(method, params)
        except TimeoutError:
            metrics.subscription_dropped("slow_client")
            raise LimitReached(
                f"the client took no frame for {self.limits.send_timeout_s:g}s; the "
                "subscription was dropped: listen again (the current views come first)"
            ) from None


async def run_resource(uri: str) -> str | None:
    """The resolver of this server's own run resources (`tether://runs/{id}[/history|/log]`)."""
    match = RUN_URI.match(uri)
    return match.group("id") if match else None
