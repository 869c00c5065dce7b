"""The poller: asks remotes how the tasks parked runs wait on stand, and wakes a run only when
its task changed, so a run waiting on a remote costs one request per poll and no replay.

Each process that runs workers runs one. It takes due polls (`remote_polls.claim`, leased so
two pollers never ask at once and a dead poller's polls come back), asks each remote with the
call's protocol, and compares what it sees with what the run last saw (the call's `seen`,
`Snapshot.digest`):

- the same: the poll is due again after the remote's `pollIntervalMs` (inside its bounds);
- changed, ended, or the request failed in any way: the poll is dropped and the run woken
  (`remote_changed`), in one transaction; the run polls again itself and decides (it parks
  again with a new poll, backs off, or ends), so every decision stays in the run's history;
- the call is over, or its run ended: the poll is dropped;
- the run is running now (it will schedule its own next poll as it parks): due again soon;
- the call's record is sealed with a key this process lacks: left to a process that has it.

It runs the process's follower (follow.py) beside it: a remote's stream telling of a change to
a task makes that task's poll due now (`hasten`), and the poll confirms the change as any poll
would. The follower learns of the tasks to follow from the runs of this process as they park
(`Clients.parked`) and from each poll that finds its task unchanged; a dropped poll ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from tether.runtime.remote.clients import Clients, Waiting
from tether.runtime.remote.config import Remote
from tether.runtime.remote.errors import RemoteError, Transient
from tether.runtime.remote.follow import Follower, FollowSettings
from tether.runtime.remote.implementations import PROTOCOLS
from tether.runtime.remote.transport import Transport
from tether.runtime.statuses import ENDED_STATUSES
from tether.storage import remote_polls, repo
from tether.storage.driver import Database
from tether.storage.errors import StorageError, translated

logger = logging.getLogger(__name__)

#: Polls taken per claim, and how many remote requests are in flight at once.
BATCH: Final = 64
CONCURRENCY: Final = 32
#: A poll of a run that is running now: looked at again after this many seconds.
BUSY_AGAIN_S: Final = 1.0

Verdict = Literal["again", "wake", "drop"]


@dataclass(frozen=True)
class Look:
    """What one poll decided: `again` after `after_s`, `wake` the run, or `drop` the poll."""

    verdict: Verdict
    after_s: float = 0.0


class RemotePoller:
    """One process's poller (module docstring)."""

    def __init__(
        self,
        db: Database,
        remotes: Mapping[str, Remote],
        clients: Clients,
        *,
        poll_s: float = 1.0,
        lease_s: float = 30.0,
        follow: FollowSettings | None = None,
    ) -> None:
        self.db = db
        self.remotes = remotes
        self.clients = clients
        self.poll_s = poll_s
        self.lease_s = lease_s  # a taken poll is due again after it (its poller died)
        self.polls = 0  # remote requests made, for tests and the benchmark
        self.wakes = 0
        self.follower = Follower(remotes, clients, self.hasten, follow or FollowSettings())
        self._stopping = asyncio.Event()
        self._nudged = asyncio.Event()  # a poll was hastened, or stop: look at once
        self._hastened: set[tuple[str, int]] = set()
        self._gate = asyncio.Semaphore(CONCURRENCY)

    def stop(self) -> None:
        self._stopping.set()
        self._nudged.set()
        self.follower.stop()

    def hasten(self, execution_id: str, seq: int) -> None:
        """Make call `seq` of the run's poll due now (its remote told of a change)."""
        self._hastened.add((execution_id, seq))
        self._nudged.set()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.follower.run(), name="tether-remote-follower")
            self.clients.followers.append(self.follower)
            try:
                await self._poll()
            finally:
                self.clients.followers.remove(self.follower)
                self.follower.stop()

    async def _poll(self) -> None:
        backoff = self.poll_s
        while not self._stopping.is_set():
            self._nudged.clear()  # a poll hastened from here on is looked at after this round
            try:
                if self._hastened:
                    hastened, self._hastened = self._hastened, set()
                    try:
                        await remote_polls.hasten(self.db, list(hastened))
                    except StorageError:
                        self._hastened |= hastened
                        raise
                due = await remote_polls.claim(self.db, BATCH, self.lease_s)
                if due:
                    await self._settle(due)
                backoff = self.poll_s
            except StorageError:
                logger.warning("remote polls failed; retrying in %.1fs", backoff)
                due = []
                backoff = min(backoff * 2, 30.0)
            if len(due) < BATCH:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._nudged.wait(), backoff)

    async def _settle(self, due: list[remote_polls.DuePoll]) -> None:
        looks = await asyncio.gather(*(self._look(p) for p in due))
        again = [
            (p.execution_id, p.seq, look.after_s)
            for p, look in zip(due, looks, strict=True)
            if look.verdict == "again"
        ]
        drop = [
            (p.execution_id, p.seq)
            for p, look in zip(due, looks, strict=True)
            if look.verdict == "drop"
        ]
        wake = [
            (p.execution_id, p.seq)
            for p, look in zip(due, looks, strict=True)
            if look.verdict == "wake"
        ]
        await remote_polls.reschedule(self.db, again)
        await remote_polls.drop(self.db, drop)
        for execution_id, seq in drop:
            self.follower.forget(execution_id, seq)
        for execution_id, seq in wake:
            await self._wake(execution_id, seq)

    async def _wake(self, execution_id: str, seq: int) -> None:
        """Drop the poll and wake the run, together: a run that parks again meanwhile is woken
        again by the event, and schedules its next poll then."""
        async with translated(), self.db.acquire() as conn, conn.transaction():
            await remote_polls.drop(conn, [(execution_id, seq)])
            await repo.append_event(conn, execution_id, "remote_changed", {"seq": seq})
        self.wakes += 1

    async def _look(self, poll: remote_polls.DuePoll) -> Look:
        if poll.unreadable:  # sealed with a key this process lacks: one that has it polls
            return Look("again", self.lease_s)
        record = poll.record
        if record is None or record.done or poll.status in ENDED_STATUSES:
            return Look("drop")
        if poll.status != "waiting":
            return Look("again", BUSY_AGAIN_S)
        state: Mapping[str, Any] = record.result if isinstance(record.result, dict) else {}
        remote = self.remotes.get(str(state.get("remote")))
        task = state.get("task")
        if not isinstance(task, str):
            return Look("drop")
        if remote is None:
            return Look("wake")  # the run says what becomes of a remote no longer configured
        tool = str(state.get("tool"))
        transport = Transport(remote, self.clients.get(), tool, self.clients.tool_lists)
        proto = PROTOCOLS[remote.protocol](remote, transport, tool, {}, None)
        async with self._gate:
            self.polls += 1
            try:
                snapshot = await proto.poll(task)
            except (Transient, RemoteError):
                return Look("wake")  # the run's own poll retries or ends the call
        if snapshot.ended or snapshot.digest() != state.get("seen"):
            return Look("wake")
        seen = snapshot.digest()
        self.follower.follow(Waiting(remote.name, task, poll.execution_id, poll.seq, seen))
        return Look("again", remote.poll_delay(snapshot.poll_ms, int(state.get("polls", 0))))
