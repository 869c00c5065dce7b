"""Following remote tasks over `subscriptions/listen`, beside the polls: a change the remote
pushes makes the task's poll due now, so a run waiting on a remote task learns of it when it
happens instead of at its next poll.

What a notification says is only a hint. The follower writes nothing of it: it tells the
poller (`poke`) to poll that task now, and the poll (`tasks/get`) confirms the change and wakes
the run, which polls again itself and records what it sees, exactly as after a timed poll. The
poll timers stay as they are: a remote that offers no stream, a stream that dropped, a task
the remote did not agree to follow, all cost latency and nothing else.

One stream per remote (an `mcp-tasks` remote with `listen` on), covering the tasks this
process's runs wait on there (`follow`: told as a run parks, and by the poller for each task it
polls; `forget`: the poll was dropped, or the task ended):

- The set a stream covers is fixed when it opens. A task to follow that it does not cover opens
  a new stream with the whole set; the old one closes once the new one is acknowledged, so no
  notification falls between them. Opens are at least `reopen_min_s` apart, so tasks parked
  together share one.
- A stream covers at most `max_ids` tasks (fewer when the remote refuses as many and says its
  limit); the others are polled only, and come in when room is made.
- A notification whose task view has the digest the run last saw (`Snapshot.digest`: its
  status and the keys of its questions) changes nothing: a stream opened again may repeat
  every current view. A run that parks again having seen less than the stream told (its poll
  came before the change) gets one more poll.
- A stream that drops, or cannot be opened, is opened again after a backoff (`retry_min_s`
  doubling to `retry_max_s`); a remote without the method (`-32601`), or whose
  acknowledgement agrees to no task notifications, is asked again after `unsupported_s`.
- A stream that stays silent for `idle_s` is opened again (a remote that vanished without
  closing the connection is noticed).

While nothing changes, a stream costs no CPU: its reader waits on the socket.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from tether.runtime.remote import spec
from tether.runtime.remote.clients import Clients, Waiting
from tether.runtime.remote.config import Remote
from tether.runtime.remote.errors import RemoteError, RemoteProtocolError, Transient
from tether.runtime.remote.mcp import CAPABILITIES, snapshot_of
from tether.runtime.remote.transport import Rpc, Transport

logger = logging.getLogger(__name__)

#: The protocol whose remotes are followed (MCP with the Tasks extension).
FOLLOWED_PROTOCOL: Final = "mcp-tasks"

#: Called with `(execution_id, seq)` of a poll to make due now.
Poke = Callable[[str, int], None]


@dataclass(frozen=True)
class FollowSettings:
    """Bounds of the follower (module docstring)."""

    max_ids: int = 256
    max_watched: int = 10_000
    reopen_min_s: float = 1.0
    retry_min_s: float = 1.0
    retry_max_s: float = 60.0
    unsupported_s: float = 3600.0
    idle_s: float = 300.0


class NotOffered(Exception):
    """The remote's acknowledgement agreed to no task notifications at all."""


@dataclass(frozen=True)
class Pause:
    """What a stream that failed to open, or dropped, is followed by: a wait of `seconds`
    before the next open; `failed`: it counts toward the backoff; `cap`: the remote said how
    many ids a stream may ask for; `refused`: the remote refused listening (not for now)."""

    seconds: float
    failed: bool = False
    cap: int | None = None
    refused: bool = False


def pause_after(
    error: BaseException | None, asked: int, failures: int, settings: FollowSettings
) -> Pause:
    """The pause after a stream asking for `asked` tasks ended with `error` (None: it ended
    before its acknowledgement without one), the `failures` before it counted."""
    if isinstance(error, NotOffered):
        return Pause(settings.unsupported_s, refused=True)
    if isinstance(error, RemoteProtocolError):
        limit = error.data.get("max") if isinstance(error.data, dict) else None
        if error.code == spec.INVALID_PARAMS and isinstance(limit, int) and 0 < limit < asked:
            return Pause(0.0, cap=limit)  # over its limit, which it said: again, fewer
        # Refused (no such method, -32601, or any other refusal): asking again soon would
        # be refused the same way.
        return Pause(settings.unsupported_s, refused=True)
    delay = min(settings.retry_min_s * 2**failures, settings.retry_max_s)
    return Pause(float(delay), failed=True)


@dataclass
class _Watch:
    execution_id: str
    seq: int
    seen: str | None  # the digest the run last saw (None: unknown: any view differs)
    told: str | None  # the digest last settled: the stream's last view, or the run's poll
    excluded: bool = False  # the remote did not agree to follow it: polled only


@dataclass(eq=False)
class _Stream:
    """One opened (or opening) stream of a remote."""

    wanted: tuple[str, ...]
    covered: frozenset[str] = frozenset()
    acked: bool = False
    settled: asyncio.Event = field(default_factory=asyncio.Event)  # acked, or ended first
    error: BaseException | None = None
    task: asyncio.Task[None] | None = None


@dataclass(eq=False)
class _Feed:
    """One remote's following: the tasks watched there and its current stream."""

    remote: Remote
    cap: int
    watched: dict[str, _Watch] = field(default_factory=dict)  # by task id, in arrival order
    current: _Stream | None = None
    dirty: asyncio.Event = field(default_factory=asyncio.Event)  # look at the stream again
    failures: int = 0
    next_open: float = 0.0  # loop time before which no stream is opened
    driver: asyncio.Task[None] | None = None

    @property
    def covered(self) -> frozenset[str]:
        return self.current.covered if self.current is not None else frozenset()

    def wanted(self) -> tuple[str, ...]:
        """The tasks a stream opened now would ask for: those covered now first (so a
        reopen never drops one), then the others, up to the cap."""
        live = [t for t in self.covered if t in self.watched]
        others = [t for t, w in self.watched.items() if not w.excluded and t not in self.covered]
        return tuple([*live, *others][: self.cap])

    def room(self) -> int:
        return self.cap - sum(t in self.watched for t in self.covered)

    def uncovered(self) -> bool:
        return any(not w.excluded and t not in self.covered for t, w in self.watched.items())


class Follower:
    """One process's streams of its remotes' task notifications (module docstring)."""

    def __init__(
        self,
        remotes: Mapping[str, Remote],
        clients: Clients,
        poke: Poke,
        settings: FollowSettings = FollowSettings(),
    ) -> None:
        self.remotes = remotes
        self.clients = clients
        self.poke = poke
        self.settings = settings
        self.opened = 0  # streams acknowledged, for tests and the benchmark
        self.pokes = 0
        self._feeds: dict[str, _Feed] = {}
        self._polls: dict[tuple[str, int], tuple[str, str]] = {}  # (run, seq) -> (remote, task)
        self._tg: asyncio.TaskGroup | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()

    # --- what to follow --------------------------------------------------------------------------

    def follow(self, waiting: Waiting) -> None:
        """Watch `waiting.task` for the call that parked on it (a new digest replaces the
        one known)."""
        remote = self.remotes.get(waiting.remote)
        if remote is None or remote.protocol != FOLLOWED_PROTOCOL or not remote.listen:
            return
        feed = self._feeds.get(remote.name)
        if feed is None:
            feed = self._feeds[remote.name] = _Feed(remote, self.settings.max_ids)
            self._drive(feed)
        poll = (waiting.execution_id, waiting.seq)
        known = self._polls.get(poll)
        if known is not None and known != (remote.name, waiting.task):
            self.forget(*poll)
        watch = feed.watched.get(waiting.task)
        if watch is not None:
            watch.execution_id, watch.seq = waiting.execution_id, waiting.seq
            self._polls[poll] = (remote.name, waiting.task)
            if watch.told != waiting.seen:
                # The stream told of a view the run has not seen, and the run's poll may be
                # older than it: one poll now settles which is the latest (once: told is
                # taken as the run's from here).
                self._poke(watch)
            watch.seen = watch.told = waiting.seen
            return
        if len(feed.watched) >= self.settings.max_watched:
            return  # polled only
        feed.watched[waiting.task] = _Watch(
            waiting.execution_id, waiting.seq, waiting.seen, waiting.seen
        )
        self._polls[poll] = (remote.name, waiting.task)
        if feed.room() > 0:
            feed.dirty.set()

    def forget(self, execution_id: str, seq: int) -> None:
        """Stop watching the task call `seq` of the run waits on (the poll was dropped)."""
        found = self._polls.pop((execution_id, seq), None)
        if found is None:
            return
        feed = self._feeds.get(found[0])
        if feed is not None:
            self._unwatch(feed, found[1])

    def _unwatch(self, feed: _Feed, task: str) -> None:
        watch = feed.watched.pop(task, None)
        if watch is None:
            return
        self._polls.pop((watch.execution_id, watch.seq), None)
        # Reopened for the others only once a quarter of the stream is free (each reopen
        # makes the remote read every task the stream covers).
        if feed.uncovered() and feed.room() * 4 >= feed.cap:
            feed.dirty.set()

    def watched(self, remote: str) -> frozenset[str]:
        """The tasks of `remote` being followed (covered by its stream or not)."""
        feed = self._feeds.get(remote)
        return frozenset(feed.watched) if feed is not None else frozenset()

    def covered(self, remote: str) -> frozenset[str]:
        """The tasks of `remote` its current stream covers (empty without one)."""
        feed = self._feeds.get(remote)
        return feed.covered if feed is not None else frozenset()

    # --- the loop --------------------------------------------------------------------------------

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        """Follow until `stop`: each remote's driver opens and replaces its streams."""
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            for feed in self._feeds.values():
                self._drive(feed)
            await self._stopping.wait()
            self._tg = None
            for task in list(self._tasks):
                task.cancel()

    def _spawn(self, coro: Any, name: str) -> asyncio.Task[None] | None:
        if self._tg is None:
            coro.close()
            return None
        task = self._tg.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _drive(self, feed: _Feed) -> None:
        if feed.driver is None or feed.driver.done():
            feed.driver = self._spawn(self._driver(feed), f"tether-follow-{feed.remote.name}")

    async def _driver(self, feed: _Feed) -> None:
        """Keep one stream open over the feed's wanted tasks (module docstring)."""
        loop = asyncio.get_running_loop()
        while True:
            await feed.dirty.wait()
            feed.dirty.clear()
            if not self._reopen(feed):
                continue
            pause = feed.next_open - loop.time()
            if pause > 0:
                await asyncio.sleep(pause)  # the backoff, or the spacing between opens
            wanted = feed.wanted()
            if not wanted:
                continue
            feed.next_open = loop.time() + self.settings.reopen_min_s
            stream = _Stream(wanted)
            stream.task = self._spawn(self._read(feed, stream), f"tether-listen-{feed.remote.name}")
            if stream.task is None:
                return
            await stream.settled.wait()
            if stream.acked:
                if self._reopen(feed):
                    feed.dirty.set()  # more came meanwhile
                continue
            feed.next_open = loop.time() + self._delay(feed, stream.error, len(stream.wanted))
            feed.dirty.set()

    def _reopen(self, feed: _Feed) -> bool:
        """Whether a stream opened now would follow more than the current one."""
        if feed.current is None:
            return bool(feed.wanted())
        return feed.uncovered() and feed.room() > 0

    def _delay(self, feed: _Feed, error: BaseException | None, asked: int) -> float:
        """How long to wait before opening again after a stream asking for `asked` tasks
        failed to open, or dropped (`pause_after`)."""
        pause = pause_after(error, asked, feed.failures, self.settings)
        if pause.cap is not None:
            feed.cap = pause.cap
        if pause.failed:
            feed.failures += 1
        if pause.refused:
            logger.info(
                "remote %r refused subscriptions/listen (%s): its tasks are polled only",
                feed.remote.name,
                error,
            )
        return pause.seconds

    # --- one stream ------------------------------------------------------------------------------

    async def _read(self, feed: _Feed, stream: _Stream) -> None:
        """Open `stream` and act on what it sends until it ends; never raises what the remote
        does (its error is kept on the stream)."""
        remote = feed.remote
        transport = Transport(remote, self.clients.get(), "")
        rpc = Rpc(
            spec.LISTEN,
            {"notifications": {"taskIds": list(stream.wanted)}},
            capabilities=CAPABILITIES,
        )
        try:
            async with transport.listen(rpc, idle_s=self.settings.idle_s) as messages:
                async for message in messages:
                    if not self._take(feed, stream, message):
                        break
                else:
                    raise Transient(f"remote {remote.name!r} closed the stream without its result")
            if stream.acked:
                self._ended(feed, stream)  # the remote ended it: nothing it agreed is left
        except (Transient, RemoteError, NotOffered) as exc:
            stream.error = exc
            if stream.acked:
                logger.info("remote %r: listen stream dropped (%s)", remote.name, exc)
        finally:
            stream.settled.set()
            if feed.current is stream:  # it dropped, or ended: open another when there is need
                feed.current = None
                loop = asyncio.get_running_loop()
                if stream.error is not None:
                    feed.next_open = loop.time() + self._delay(
                        feed, stream.error, len(stream.wanted)
                    )
                feed.dirty.set()

    def _take(self, feed: _Feed, stream: _Stream, message: Mapping[str, Any]) -> bool:
        """Act on one message of the stream; False when it was the stream's last (its
        response)."""
        if "id" in message and ("result" in message or "error" in message):
            error = message.get("error")
            if isinstance(error, dict):
                code = error.get("code")
                raise RemoteProtocolError(
                    str(error.get("message") or "listen refused"),
                    remote=feed.remote.name,
                    code=code if isinstance(code, int) and not isinstance(code, bool) else None,
                    data=error.get("data"),
                )
            return False
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        method = message.get("method")
        if method == spec.LISTEN_ACKNOWLEDGED and not stream.acked:
            self._acknowledged(feed, stream, params)
        elif method == spec.TASK_NOTIFICATION and stream.acked:
            self._notified(feed, params)
        return True

    def _acknowledged(self, feed: _Feed, stream: _Stream, params: Mapping[str, Any]) -> None:
        notifications = params.get("notifications")
        agreed = notifications.get("taskIds") if isinstance(notifications, dict) else None
        if not isinstance(agreed, list):
            raise NotOffered()
        covered = frozenset(t for t in agreed if isinstance(t, str)) & frozenset(stream.wanted)
        for task in stream.wanted:
            watch = feed.watched.get(task)
            if watch is not None and task not in covered:
                watch.excluded = True  # the remote would not follow it: polled only
        stream.covered = covered
        stream.acked = True
        old, feed.current = feed.current, stream
        feed.failures = 0
        self.opened += 1
        if old is not None and old.task is not None:
            old.task.cancel()  # the new stream covers what it did
        stream.settled.set()

    def _notified(self, feed: _Feed, params: Mapping[str, Any]) -> None:
        """A task's view: its poll is made due now when the run has not seen it."""
        task = params.get("taskId")
        if not isinstance(task, str) or (watch := feed.watched.get(task)) is None:
            return
        try:
            snapshot = snapshot_of(params, feed.remote.name, "")
            digest: str | None = snapshot.digest()
            ended = snapshot.ended
        except RemoteProtocolError:
            digest, ended = None, False  # the poll reads it, and fails the call if it must
        news = digest is None or digest != watch.told
        watch.told = digest
        if news and digest != watch.seen:
            self._poke(watch)
        if ended:
            self._unwatch(feed, task)

    def _poke(self, watch: _Watch) -> None:
        self.pokes += 1
        self.poke(watch.execution_id, watch.seq)

    def _ended(self, feed: _Feed, stream: _Stream) -> None:
        """The remote ended an acknowledged stream: it follows none of its tasks any more
        (a task still watched is then polled only)."""
        for task in stream.covered:
            watch = feed.watched.get(task)
            if watch is not None:
                watch.excluded = True
