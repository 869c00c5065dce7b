"""Coalesced primary-key reads of execution rows.

Polling (`tasks/get`, status tools, run resources) is the hottest read: many clients, each
asking for one row, over and over. Checking a connection out of asyncpg's pool and back costs
about as much CPU as the query itself, so concurrent reads share statements. A read runs its
own statement while fewer than `max_statements` are in flight; past that it queues, and the
next statement to start takes every id queued by then (`id = ANY($1)`).

A read only ever joins a statement that has not been sent yet, so it sees everything
committed before it was asked for (a client's own earlier writes included).

On a pool, each statement runs on a connection checked out for it, and the connection goes
back to the pool on a task of its own once the rows are in: asyncpg's release is shielded
from cancellation, which costs three more turns of the event loop, and a reader waiting on
them would wait behind whatever else runs on each of those turns.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tether.storage import repo
from tether.storage.driver import Database, Queryable
from tether.storage.errors import StorageError, translated
from tether.storage.rows import ExecutionRow

Waiters = dict[str, list[asyncio.Future[ExecutionRow | None]]]
T = TypeVar("T")

logger = logging.getLogger(__name__)


class RowReader:
    """Reads execution rows by id on `pool` (a pool, or one connection), coalescing
    concurrent reads."""

    def __init__(self, pool: Queryable, *, max_statements: int, max_batch: int = 128) -> None:
        if max_statements < 1 or max_batch < 1:
            raise ValueError("max_statements and max_batch must be at least 1")
        self._pool = pool
        self._checkout = _as_pool(pool)
        self._max_statements = max_statements
        self._max_batch = max_batch
        self._in_flight = 0
        self._queued: Waiters = {}
        self._tasks: set[asyncio.Task[list[ExecutionRow]]] = set()
        self._releases: set[asyncio.Task[None]] = set()

    async def get(self, execution_id: str) -> ExecutionRow | None:
        """The row, or None. Raises StorageError (translated) like repo.get_execution."""
        if self._in_flight < self._max_statements and not self._queued:
            self._in_flight += 1
            try:
                return await self._run(repo.get_execution, execution_id)
            finally:
                self._finished()
        waiter: asyncio.Future[ExecutionRow | None] = asyncio.get_running_loop().create_future()
        self._queued.setdefault(execution_id, []).append(waiter)
        return await waiter

    def _finished(self) -> None:
        self._in_flight -= 1
        if self._queued:
            self._start_batch()

    def _start_batch(self) -> None:
        ids = list(itertools.islice(self._queued, self._max_batch))
        batch = {execution_id: self._queued.pop(execution_id) for execution_id in ids}
        self._in_flight += 1
        task = asyncio.get_running_loop().create_task(self._query(batch))
        self._tasks.add(task)  # the loop keeps only a weak reference
        # A done callback runs even for a task cancelled before it started.
        task.add_done_callback(lambda done: self._deliver(batch, done))

    async def _query(self, batch: Waiters) -> list[ExecutionRow]:
        ids = [i for i, futures in batch.items() if not all(f.done() for f in futures)]
        return await self._run(repo.get_executions, ids) if ids else []

    async def _run(self, read: Callable[[Queryable, Any], Awaitable[T]], arg: Any) -> T:
        """`read(connection, arg)` on a connection checked out of the pool, which goes back
        to it on a task of its own (held until it has); on a plain connection, in place."""
        if self._checkout is None:
            return await read(self._pool, arg)
        with translated():
            conn = await self._checkout.acquire()
        try:
            return await read(conn, arg)
        finally:
            release = asyncio.get_running_loop().create_task(self._checkout.release(conn))
            self._releases.add(release)
            release.add_done_callback(self._released)

    def _released(self, task: asyncio.Task[None]) -> None:
        self._releases.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            logger.warning("giving a connection back to the pool failed: %r", exc)

    def _deliver(self, batch: Waiters, task: asyncio.Task[list[ExecutionRow]]) -> None:
        self._tasks.discard(task)
        try:
            if task.cancelled():
                _fail(batch, asyncio.CancelledError())
            elif (exc := task.exception()) is not None:
                _fail(batch, exc)
            else:
                found = {row.id: row for row in task.result()}
                for execution_id, futures in batch.items():
                    for future in futures:
                        if not future.done():
                            future.set_result(found.get(execution_id))
        finally:
            self._finished()


def _as_pool(db: Queryable) -> Database | None:
    """`db` as a pool to check connections out of, or None for a single connection."""
    if callable(getattr(db, "acquire", None)) and callable(getattr(db, "release", None)):
        return db  # type: ignore[return-value]  # a Database: acquire and release
    return None


def _fail(batch: Waiters, exc: BaseException) -> None:
    """Every reader of the batch fails as its own read would have: with its own copy of a
    storage error (one exception object must not be raised in several tasks), cancelled
    when the batch was."""
    for futures in batch.values():
        for future in futures:
            if future.done():
                continue
            if isinstance(exc, asyncio.CancelledError):
                future.cancel()
            elif isinstance(exc, StorageError):
                copy = type(exc)(str(exc))
                copy.__cause__ = exc.__cause__
                future.set_exception(copy)
            else:
                future.set_exception(exc)
