"""The asyncpg pool: jsonb travels as orjson text both ways."""

from __future__ import annotations

from typing import Any

import asyncpg
import orjson

from tether.storage.errors import translated


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
    """Open a pool on `dsn`. Raises DatabaseUnavailable when the server cannot be reached."""
    with translated():
        pool = await asyncpg.create_pool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            init=init_connection,
            connection_class=_Connection,
            command_timeout=60,
            server_settings={"application_name": "tether"},
        )
    assert pool is not None  # noqa: S101 — create_pool returns None only when not awaited
    return pool


async def connect(dsn: str) -> asyncpg.Connection:
    """One connection with the codecs, outside any pool (LISTEN, migrations, admin)."""
    with translated():
        conn = await asyncpg.connect(dsn, server_settings={"application_name": "tether"})
        await init_connection(conn)
    return conn
