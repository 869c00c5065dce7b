"""Scratch databases, for tests of workflows: an embedded PostgreSQL server in a directory of
the caller's, and databases created on a server (empty, or copies of a migrated template) and
dropped again. tether.testing builds its per-test databases from these; surfaces reach storage
only through the runtime, so the storage pieces are wrapped here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tether.runtime.operations.storage_errors import storage_errors
from tether.storage import embedded, migrate, pool, scratch
from tether.storage.embedded import EmbeddedServer

__all__ = [
    "EmbeddedServer",
    "create_database",
    "create_template",
    "drop_database",
    "route_database",
    "start_embedded",
    "with_database",
]


def start_embedded(data_dir: Path) -> EmbeddedServer:
    """Start PostgreSQL under `data_dir` (keep the path short: the server's socket lives in
    it); `stop()` the server returned when done. Blocks while it starts. Raises Unavailable."""
    with storage_errors():
        return embedded.start(data_dir)


def route_database(
    dsn: str, *, statement_cache_size: int | None, listen_dsn: str | None
) -> Callable[[], None]:
    """Connect to `dsn` in this process keeping `statement_cache_size` prepared statements
    per connection (None: the default) and LISTENing at `listen_dsn` (None: `dsn`), until the
    returned function is called."""
    return pool.route_as(dsn, statement_cache_size=statement_cache_size, listen_dsn=listen_dsn)


def with_database(dsn: str, name: str) -> str:
    """The same server's DSN, pointing at database `name`."""
    return scratch.with_database(dsn, name)


async def create_database(server_dsn: str, name: str, *, template: str | None = None) -> str:
    """Create database `name` on the server of `server_dsn`, a copy of `template` when given;
    its DSN. Raises ValueError for a name that is not letters, digits and `_`, Unavailable
    when the server refuses or cannot be reached."""
    with storage_errors():
        return await scratch.create(server_dsn, name, template=template)


async def create_template(server_dsn: str, name: str) -> str:
    """Create database `name` on the server of `server_dsn` and apply every migration to it;
    its DSN (a template for `create_database`). Raises as `create_database`."""
    with storage_errors():
        dsn = await scratch.create(server_dsn, name)
        conn = await pool.connect(dsn)
        try:
            await migrate.migrate(conn)
        finally:
            await conn.close()
    return dsn


async def drop_database(server_dsn: str, name: str) -> None:
    """Drop database `name` (if it exists) on the server of `server_dsn`, closing its
    connections first. Raises ValueError for a bad name, Unavailable as `create_database`."""
    with storage_errors():
        await scratch.drop(server_dsn, name)
