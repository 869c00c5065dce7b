"""Scratch databases: create one on a server (empty, or a copy of a template) and drop it.

Tests and tether.testing make a database per test this way; a server never does. Database
names are identifiers, which a statement cannot take as parameters, so they are checked
against a plain pattern and quoted, never pasted in as given. Every asyncpg error leaves as a
StorageError.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit, urlunsplit

from tether.storage import pool
from tether.storage.errors import translated

#: What a scratch database may be called: letters, digits and `_`, at most 63 bytes (PostgreSQL's
#: identifier limit), starting with a letter or `_`.
NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def quoted(name: str) -> str:
    """`name` as a quoted SQL identifier. Raises ValueError unless it matches NAME."""
    if not NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a database name this module creates")
    return f'"{name}"'


def with_database(dsn: str, name: str) -> str:
    """The same server's DSN, pointing at database `name`."""
    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


async def create(server_dsn: str, name: str, *, template: str | None = None) -> str:
    """Create database `name` (a copy of `template` when given) on the server `server_dsn`
    points at; its DSN. Raises ValueError for a bad name, StorageError when the server refuses
    (a name taken, a template in use) or cannot be reached."""
    statement = f"CREATE DATABASE {quoted(name)}"
    if template is not None:
        statement += f" TEMPLATE {quoted(template)}"
    conn = await pool.connect(server_dsn)
    try:
        with translated():
            await conn.execute(statement)
    finally:
        await conn.close()
    return with_database(server_dsn, name)


async def drop(server_dsn: str, name: str) -> None:
    """Drop database `name` if it exists, closing its connections first. Raises ValueError
    for a bad name, StorageError when the server refuses or cannot be reached."""
    conn = await pool.connect(server_dsn)
    try:
        with translated():
            await conn.execute(f"DROP DATABASE IF EXISTS {quoted(name)} WITH (FORCE)")
    finally:
        await conn.close()
