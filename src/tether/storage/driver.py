"""The seam below the runtime: what the runtime and the queries need from a database.

The runtime names these Protocols, never asyncpg's types (as pgqueuer's `Driver` does). They
are typing only: asyncpg's `Pool`, its pooled connections and a plain `Connection` satisfy them
as they are, so no wrapper sits on a hot path (no extra await, no allocation). The asyncpg
implementation is `pool.create_pool` / `pool.connect` and `notify.Listener`; mypy checks that
they fit where the runtime receives them, and tests/storage/test_driver.py checks it again.

| Protocol | who provides it | what uses it |
|---|---|---|
| `Queryable` | a pool or a connection | every `repo` function (one statement each) |
| `Connection` | `pool.acquire()` | transactions: several statements that commit together |
| `Database` | `pool.create_pool` | the runtime: operations, workers, janitor |
| `Notifications` | `notify.Listener` | the runtime's wake-ups and change waits |
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Iterable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from asyncpg import Record


class Queryable(Protocol):
    """Runs one statement: a pool (on a connection it checks out) or one connection."""

    async def fetch(
        self, query: str, *args: object, timeout: float | None = None
    ) -> list[Record]: ...

    async def fetchrow(
        self, query: str, *args: object, timeout: float | None = None
    ) -> Record | None: ...

    async def fetchval(
        self, query: str, *args: object, column: int = 0, timeout: float | None = None
    ) -> Any: ...

    async def execute(self, query: str, *args: object, timeout: float | None = None) -> str: ...


class Connection(Queryable, Protocol):
    """One connection: statements in order, and transactions over them."""

    def transaction(self) -> AbstractAsyncContextManager[Any]:
        """A transaction block: commits when the block ends, rolls back when it raises."""
        ...

    def is_closed(self) -> bool: ...


class Acquire(Protocol):
    """`async with db.acquire() as conn` (given back at the end), or `conn = await
    db.acquire()` (give it back with `db.release(conn)`)."""

    async def __aenter__(self) -> Connection: ...

    async def __aexit__(self, *exc: object) -> None: ...

    def __await__(self) -> Generator[Any, None, Connection]: ...


class Database(Queryable, Protocol):
    """A pool of connections."""

    def acquire(self) -> Acquire: ...

    # Any: asyncpg's pool takes back only its own connection type, which a Protocol parameter
    # cannot name without naming asyncpg; pass it what `acquire` gave.
    async def release(self, connection: Any) -> None: ...

    def get_max_size(self) -> int: ...

    async def close(self) -> None: ...


Callback = Callable[[str, str], None]  # (channel, payload)


class Notifications(Protocol):
    """NOTIFY payloads by channel; `ready` is set while notifications are being delivered
    (while it is clear, consumers poll)."""

    @property
    def ready(self) -> asyncio.Event: ...

    def subscribe(self, channel: str, callback: Callback) -> Callable[[], None]:
        """Call `callback(channel, payload)` on each notification; returns the unsubscribe."""
        ...

    def echo(self, notes: Iterable[tuple[str, str]]) -> None:
        """Deliver notifications this process is about to send to its own subscribers now."""
        ...
