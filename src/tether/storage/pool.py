"""The asyncpg pool: jsonb travels as orjson text both ways.

How this process reaches a database URL is its `Route`: whether connections keep prepared
statements (not through a transaction-pooling proxy such as PgBouncer, which gives each
transaction whichever server connection is free, where a statement prepared on another is
unknown), and where the LISTEN connection goes (a direct connection: such a proxy delivers no
notifications). A URL with no route installed is reached directly with the driver's defaults.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import asyncpg
import orjson

from tether.storage.errors import translated

#: Prepared statements asyncpg keeps per connection unless told otherwise (its own default).
DEFAULT_STATEMENT_CACHE_SIZE: Final = 100


@dataclass(frozen=True)
class Route:
    """How this process connects to one database URL.

    Args:
        statement_cache_size: prepared statements kept per connection; 0 keeps none, and each
            statement is then parsed again with its parameters in one message, as a
            transaction pooler needs.
        listen_dsn: where the LISTEN connection goes; None: the URL itself.
    """

    statement_cache_size: int = DEFAULT_STATEMENT_CACHE_SIZE
    listen_dsn: str | None = None


_DIRECT: Final = Route()
_ROUTES: dict[str, list[Route]] = {}


def route(dsn: str, how: Route) -> Callable[[], None]:
    """Connect to `dsn` as `how` says in this process until the returned function is called.
    Routes of one URL nest (the last one wins until it is removed): one per URL is the model,
    nesting serves a test that runs a server and a command side by side."""
    _ROUTES.setdefault(dsn, []).append(how)

    def remove() -> None:
        routes = _ROUTES.get(dsn, [])
        for i in range(len(routes) - 1, -1, -1):
            if routes[i] is how:
                del routes[i]
                break
        if not routes:
            _ROUTES.pop(dsn, None)

    return remove


def route_as(
    dsn: str, *, statement_cache_size: int | None = None, listen_dsn: str | None = None
) -> Callable[[], None]:
    """`route` `dsn` keeping `statement_cache_size` prepared statements per connection (None:
    the default; 0 behind a transaction pooler) and LISTENing at `listen_dsn` (None: `dsn`
    itself). With neither, nothing is installed (a route already in force for `dsn` stays)
    and the function returned does nothing."""
    how = Route(
        DEFAULT_STATEMENT_CACHE_SIZE if statement_cache_size is None else statement_cache_size,
        listen_dsn or None,
    )
    return _keep if how == _DIRECT else route(dsn, how)


def _keep() -> None:
    return None


@contextlib.contextmanager
def routed(
    dsn: str, *, statement_cache_size: int | None = None, listen_dsn: str | None = None
) -> Iterator[None]:
    """`route_as` for the block."""
    remove = route_as(dsn, statement_cache_size=statement_cache_size, listen_dsn=listen_dsn)
    try:
        yield
    finally:
        remove()


def route_of(dsn: str) -> Route:
    """How this process connects to `dsn`: its installed route, else directly."""
    routes = _ROUTES.get(dsn)
    return routes[-1] if routes else _DIRECT


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def json_text(value: Any) -> str | None:
    """A jsonb value as the JSON text a `text[]::jsonb[]` parameter takes (None: SQL NULL).
    Arrays of jsonb go as text: asyncpg reads a Python list inside an array as a dimension."""
    return None if value is None else _dumps(value)


async def init_connection(conn: asyncpg.Connection) -> None:
    """Register the jsonb/json codecs on a new connection."""
    for typename in ("jsonb", "json"):
        await conn.set_type_codec(
            typename, encoder=_dumps, decoder=orjson.loads, schema="pg_catalog", format="text"
        )


class _Connection(asyncpg.Connection):
    """Pooled connections skip asyncpg's reset query (UNLISTEN, RESET ALL, advisory unlock,
    CLOSE ALL): Tether keeps no session state on them — LISTEN has its own connection, advisory
    locks are transaction-scoped — and the reset was half of a worker's round trips. Open
    transactions are still rolled back on release."""

    def get_reset_query(self) -> str:
        return ""


async def create_pool(dsn: str, *, min_size: int = 1, max_size: int = 10) -> asyncpg.Pool:
    """Open a pool on `dsn` (as its route says). Raises DatabaseUnavailable when the server
    cannot be reached."""
    with translated():
        pool = await asyncpg.create_pool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            init=init_connection,
            connection_class=_Connection,
            command_timeout=60,
            statement_cache_size=route_of(dsn).statement_cache_size,
            server_settings={"application_name": "tether"},
        )
    assert pool is not None  # noqa: S101 — create_pool returns None only when not awaited
    return pool


async def connect(dsn: str) -> asyncpg.Connection:
    """One connection with the codecs, outside any pool (LISTEN, migrations, admin), as the
    route of `dsn` says."""
    with translated():
        conn = await asyncpg.connect(
            dsn,
            statement_cache_size=route_of(dsn).statement_cache_size,
            server_settings={"application_name": "tether"},
        )
        await init_connection(conn)
    return conn
