"""Group commit of a worker's checkpoints: concurrent writes of different runs share one
statement and one commit, which also claims the runs that take the slots its settles free;
the wake-ups the writes announce are sent after it.

A write goes out at once while fewer than `max_statements` statements are in flight; past
that it queues, and the next statement to start takes the queued writes (`checkpoint_many`),
at most one per run and `max_batch` in all. Each caller still waits for the commit of the
statement that carried its write, so every run's checkpoint is durable before that run goes
on, exactly as with one statement per write; each write keeps its own fence, so a run whose
lease is lost gets LeaseLost while the others apply.

Refill: a write that settles a run (sets its status) ends that run's attempt in the worker, so
the statement carrying k settles also claims up to `Refill.room(k)` due runs for the worker,
as `repo.claim` would, and hands them to `Refill.take` once committed, before the settling
runs hear their results: the worker's claim loop then finds its slots already taken instead
of spending a statement and a commit of its own on them.

The statement notifies no one itself: a PostgreSQL transaction that notifies holds the
notification lock until its commit has been flushed, so every settle would wait for every
other one's flush. Once it has committed, the watchers (`tether_change`) and workers
(`tether_ready`) it would have notified are woken by `repo.wake`, which does not wait for
a flush: one statement for both channels, one in flight at a time, taking every wake-up due
by the time it starts, outside the statements' slots. A wake-up lost to a crash in between
is covered by the listeners' polling.

The connection: a statement keeps the pool connection it ran on for the next one (or for the
wake-ups), giving it back once no statement has used it for `linger_s` (and at `close()`): a
run's next write usually comes within milliseconds (its next step), and taking a connection
from the pool and giving it back was about a tenth of a millisecond a write. At most
`max_statements` connections are kept, and no more than a quarter of the pool (none from a
pool of fewer than four: there the others' waits would cost more); one whose statement failed
goes back to the pool at once.

A caller awaits its write's future itself (no `asyncio.shield`: one hop of the event loop
fewer a write). Cancelling the caller cancels only that future; the statement, in the batch's
own task, goes on and commits, and the other writes it carries hear their results.

A statement the server refuses (IntegrityError, InvalidData: rolled back, nothing applied) is
retried one write per statement, without a claim, so one run's bad write fails only that
run. Any other failure (the connection lost: whether it committed is unknown) fails every
write of the statement with its own copy of the error, as it would have failed each one
alone; runs it may have claimed are then claimed again once their lease expires.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tether.storage import repo
from tether.storage.driver import Connection, Database, Queryable
from tether.storage.errors import IntegrityError, InvalidData, LeaseLost, StorageError, translated
from tether.storage.notify import CHANGE_CHANNEL, READY_CHANNEL
from tether.storage.pending import Pending
from tether.storage.pool import json_text
from tether.storage.queries import Q
from tether.storage.repo import Checkpoint, CheckpointResult
from tether.storage.rows import ExecutionRow

logger = logging.getLogger(__name__)

Note = tuple[str, str]  # a wake-up: (channel, payload)

LINGER_S = 0.1  # how long an unused connection stays with the writer (module docstring)


@dataclass(frozen=True)
class Refill:
    """Runs claimed for `owner` by the statements that settle its runs (module docstring):
    `room(k)` says how many to claim with k settles, `take` receives them once committed."""

    owner: str
    lease_s: float
    abandon: repo.Abandon
    room: Callable[[int], int]
    take: Callable[[list[ExecutionRow]], None]


class CheckpointWriter:
    """Fenced checkpoint writes on `pool`, grouped across runs (see the module docstring)."""

    def __init__(
        self,
        pool: Database,
        *,
        max_statements: int = 1,
        max_batch: int = 64,
        refill: Refill | None = None,
        linger_s: float = LINGER_S,
        echo: Callable[[list[Note]], None] | None = None,
    ) -> None:
        if max_statements < 1 or max_batch < 1:
            raise ValueError("max_statements and max_batch must be at least 1")
        self._max_statements = max_statements
        self._max_batch = max_batch
        self._refill = refill
        self._echo = echo  # this process's own listener: delivers a batch of wake-ups first
        self._in_flight = 0
        self._queued: list[Pending] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._notes: list[Note] = []  # wake-ups due, not yet sent
        self._waking: asyncio.Task[None] | None = None
        self._kept = _Kept(pool, min(max_statements, pool.get_max_size() // 4), linger_s)

    async def write(
        self, execution_id: str, owner: str, attempt: int, seen_event_id: int, cp: Checkpoint
    ) -> CheckpointResult:
        """As `repo.checkpoint` on a pooled connection. Raises LeaseLost, StorageError."""
        # Cancelling the caller cancels `done` only: the statement goes on (module docstring).
        return await self.submit(execution_id, owner, attempt, seen_event_id, cp).done

    def submit(
        self, execution_id: str, owner: str, attempt: int, seen_event_id: int, cp: Checkpoint
    ) -> Pending:
        """Queue the write (sent at once if a slot is free); its `done` is what `write`
        awaits."""
        write = Pending(execution_id, owner, attempt, seen_event_id, cp)
        self._queued.append(write)
        if self._in_flight < self._max_statements:
            self._start_batch()
        return write

    async def close(self) -> None:
        """Send the wake-ups due and give back the connections kept (before the pool
        closes)."""
        while self._waking is not None:
            await asyncio.gather(self._waking, return_exceptions=True)
        await self._kept.close()

    def _finished(self) -> None:
        self._in_flight -= 1
        if self._queued:
            self._start_batch()

    def _start_batch(self) -> None:
        batch: list[Pending] = []
        seen: set[str] = set()
        kept: list[Pending] = []
        for write in self._queued:
            if write.execution_id in seen or len(batch) >= self._max_batch:
                kept.append(write)  # one write per run and statement: the next one takes it
            else:
                seen.add(write.execution_id)
                batch.append(write)
        self._queued = kept
        settling = sum(1 for write in batch if write.cp.status is not None)
        claim = self._refill.room(settling) if self._refill is not None and settling else 0
        self._in_flight += 1
        task = asyncio.get_running_loop().create_task(self._apply(batch, claim))
        self._tasks.add(task)  # the loop keeps only a weak reference
        task.add_done_callback(self._batch_done)

    def _batch_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._finished()

    async def _apply(self, batch: list[Pending], claim: int) -> None:
        try:
            results, claimed = await self._statement(batch, claim)
        except (IntegrityError, InvalidData) as exc:
            if len(batch) > 1:  # refused, nothing applied: find the bad write, one at a time
                await asyncio.gather(*(self._apply([write], 0) for write in batch))
            else:
                _fail(batch[0], exc)
            return
        except BaseException as exc:
            for write in batch:  # every writer hears how its write ended
                _fail(write, exc)
            if not isinstance(exc, Exception):
                raise
            return
        if claimed and self._refill is not None:  # before the settling runs free their slots
            self._refill.take(claimed)
        for write in batch:
            found = results.get(write.execution_id)
            if not write.done.done():
                if found is None:
                    write.done.set_exception(LeaseLost())
                else:
                    write.done.set_result(found[0])
            write.wake()
        self._wake(_notes(results, claimed))

    async def _statement(
        self, batch: list[Pending], claim: int
    ) -> tuple[Applied, list[ExecutionRow]]:
        conn = await self._kept.take()
        try:
            out = await _checkpoint_many(conn, batch, self._refill, claim)
        except BaseException:
            await self._kept.give_back(conn, healthy=False)
            raise
        await self._kept.give_back(conn, healthy=True)
        return out

    def _wake(self, notes: list[Note]) -> None:
        self._notes += notes
        if self._notes and self._waking is None:
            notes, self._notes = self._notes, []
            if self._echo is not None:
                self._echo(notes)
            self._waking = asyncio.get_running_loop().create_task(_wake(self._kept, notes))
            self._waking.add_done_callback(self._woken)

    def _woken(self, _task: asyncio.Task[None]) -> None:
        self._waking = None
        self._wake([])  # the wake-ups that came due meanwhile


class _Kept:
    """Up to `keep` pool connections kept between statements, each given back to the pool
    once unused for `linger_s` (see the module docstring)."""

    def __init__(self, pool: Database, keep: int, linger_s: float) -> None:
        self._pool = pool
        self._keep = keep
        self._linger_s = linger_s
        self._idle: list[Connection] = []
        self._used_at = 0.0  # loop time the newest idle connection was given back
        self._timer: asyncio.TimerHandle | None = None

    async def take(self) -> Connection:
        if self._idle:
            return self._idle.pop()
        with translated():
            return await self._pool.acquire()

    async def give_back(self, conn: Connection, *, healthy: bool) -> None:
        """Keep `conn` for the next statement; the pool takes it back when its statement
        failed (it may be broken or still cancelling) or enough are kept already."""
        if not healthy or len(self._idle) >= self._keep:
            await self._release(conn)
            return
        loop = asyncio.get_running_loop()
        self._idle.append(conn)
        self._used_at = loop.time()
        if self._timer is None:
            self._timer = loop.call_later(self._linger_s, self._expire)

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        idle, self._idle = self._idle, []
        for conn in idle:
            await self._release(conn)

    def _expire(self) -> None:
        self._timer = None
        if not self._idle:
            return
        loop = asyncio.get_running_loop()
        left = self._used_at + self._linger_s - loop.time()
        if left > 0:  # used since the timer was set: wait for the rest of the linger
            self._timer = loop.call_later(left, self._expire)
            return
        task = loop.create_task(self.close())
        _releasing.add(task)  # the loop keeps only a weak reference
        task.add_done_callback(_releasing.discard)

    async def _release(self, conn: Connection) -> None:
        try:
            await self._pool.release(conn)
        except Exception:  # asyncpg terminates a connection it cannot reset
            logger.warning("could not give a connection back to the pool", exc_info=True)


_releasing: set[asyncio.Task[None]] = set()

Applied = dict[str, tuple[CheckpointResult, bool, bool]]  # id: (result, changed, ready)


def _notes(results: Applied, claimed: list[ExecutionRow]) -> list[Note]:
    """The wake-ups due after a commit: the watchers of the runs whose state changed (runs
    the claim abandoned included), then the workers for the runs made runnable."""
    changed = [(CHANGE_CHANNEL, i) for i, (_, change, _) in results.items() if change]
    changed += [(CHANGE_CHANNEL, row.id) for row in claimed if row.status != "running"]
    return changed + [(READY_CHANNEL, i) for i, (_, _, wake) in results.items() if wake]


async def _wake(kept: _Kept, notes: list[Note]) -> None:
    """Send the wake-ups, both channels in one statement (on a kept connection when one is
    free); one lost here is covered by polling."""
    sent = False
    try:
        conn = await kept.take()
    except StorageError:
        logger.warning("could not send wake-ups after a checkpoint; listeners will poll")
        return
    try:
        await repo.wake(conn, notes)
        sent = True
    except StorageError:
        logger.warning("could not send wake-ups after a checkpoint; listeners will poll")
    finally:
        await kept.give_back(conn, healthy=sent)


def _fail(write: Pending, exc: BaseException) -> None:
    """The write fails as it would have alone: its own copy of a storage error (one exception
    object must not be raised in several tasks), cancelled when the statement was."""
    if not write.done.done():
        _settle_failed(write, exc)
    write.wake()


def _settle_failed(write: Pending, exc: BaseException) -> None:
    if isinstance(exc, asyncio.CancelledError):
        write.done.cancel()
    elif isinstance(exc, StorageError):
        copy = type(exc)(str(exc))
        copy.__cause__ = exc.__cause__
        write.done.set_exception(copy)
    else:
        write.done.set_exception(exc)


def _values(w: Pending, encode: Callable[[Any], Any]) -> tuple[Any, ...]:
    """A write's parameters, in the query's order, jsonb ones through `encode`."""
    cp = w.cp
    records, output = repo.sealed_checkpoint(w.execution_id, cp)
    return (
        w.execution_id, w.owner, w.attempt, encode(records), encode(cp.consumed),
        encode(cp.events), cp.set_details, cp.details, cp.status, encode(output),
        encode(cp.error), encode(cp.waits), cp.wake_at, w.seen_event_id,
        cp.successor_id, cp.run_attempt_increment, cp.truncate_from,
    )  # fmt: skip


def _columns(batch: list[Pending]) -> list[list[Any]]:
    """`checkpoint_many`'s arrays: jsonb values as JSON text (an array is one element)."""
    columns: list[list[Any]] = [[] for _ in range(17)]
    for w in batch:
        for column, value in zip(columns, _values(w, json_text), strict=True):
            column.append(value)
    return columns


async def _checkpoint_many(
    conn: Queryable, batch: list[Pending], refill: Refill | None, claim: int
) -> tuple[Applied, list[ExecutionRow]]:
    """Apply the writes in one statement, claiming up to `claim` runs for `refill`'s owner;
    for each run whose fence held, its result and whether its watchers and the workers are
    to be woken, and the claimed rows (payloads as stored, as `repo.claim` returns them).
    A statement of one write that only records calls, claiming nothing, is the lighter
    `checkpoint_step`, of the same effect."""
    if len(batch) == 1 and batch[0].cp.records_only() and (refill is None or claim == 0):
        return await _checkpoint_step(conn, batch[0]), []
    abandon = refill.abandon if refill is not None else repo.Abandon()
    one = len(batch) == 1  # scalars: the same statement in about two thirds of the time
    with translated():
        recs = await conn.fetch(
            Q["checkpoint_one"] if one else Q["checkpoint_many"],
            *(_values(batch[0], lambda v: v) if one else _columns(batch)),
            refill.owner if refill is not None else None,
            float(refill.lease_s) if refill is not None else 0.0,
            claim if refill is not None else 0,
            abandon.after,
            dict(abandon.error),
            abandon.message,
        )
    applied: Applied = {}
    claimed: list[ExecutionRow] = []
    for rec in recs:
        if rec["w_id"] is not None:
            result = CheckpointResult(
                rec["w_status"], rec["w_cancel_requested"], rec["w_last_event_id"]
            )
            applied[rec["w_id"]] = (result, rec["w_changed"], rec["w_ready"])
        if rec["id"] is not None:
            claimed.append(ExecutionRow.from_record(rec, unseal=False))
    return applied, claimed


async def _checkpoint_step(conn: Queryable, w: Pending) -> Applied:
    records, _ = repo.sealed_checkpoint(w.execution_id, w.cp)
    with translated():
        recs = await conn.fetch(
            Q["checkpoint_step"], w.execution_id, w.owner, w.attempt, records, w.cp.flush
        )
    return {
        rec["id"]: (
            CheckpointResult(rec["status"], rec["cancel_requested"], rec["last_event_id"]),
            rec["changed"],
            rec["ready"],
        )
        for rec in recs
    }
