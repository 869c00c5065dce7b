"""The storage error map: only the database connection's own errors read as losing it."""

from __future__ import annotations

import inspect
import re
import socket

import asyncpg
import pytest

from tests.conftest import direct_url
from tether.storage import errors, pool
from tether.storage.errors import (
    DatabaseUnavailable,
    IntegrityError,
    InvalidData,
    StorageError,
    connection_guard,
    storage_error,
    translated,
)


def _docstring_tree() -> dict[str, str]:
    """{class: parent} as drawn in the module docstring."""
    doc = errors.__doc__ or ""
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in doc.splitlines():
        m = re.match(r"^(?P<indent>[ │]*(?:[├└]── )?)(?P<name>[A-Z]\w+)(?:\s|$)", line)
        if not m:
            continue
        depth = len(m.group("indent"))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            parents[m.group("name")] = stack[-1][1]
        stack.append((depth, m.group("name")))
    return parents


def test_the_docstring_tree_names_every_storage_error_under_its_parent() -> None:
    """The tree drawn in storage/errors.py's docstring is the class tree (our rule)."""
    classes = {
        name: cls
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, StorageError) and cls is not StorageError
    }
    actual = {name: cls.__bases__[0].__name__ for name, cls in classes.items()}
    assert _docstring_tree() == actual


def test_user_errors_are_never_storage_errors() -> None:
    """OSError and TimeoutError raised outside the driver are the caller's own."""
    for exc in (FileNotFoundError("x"), TimeoutError(), ConnectionRefusedError(), OSError()):
        try:
            raise exc
        except Exception as caught:  # noqa: BLE001 — the point is a raised (tracebacked) error
            assert storage_error(caught) is None
        with pytest.raises(type(exc)), translated():
            raise exc


def test_the_drivers_own_errors_map_by_kind() -> None:
    """asyncpg's connection errors mean losing the database; statement errors keep their kind."""
    cases: list[tuple[Exception, type[StorageError]]] = [
        (asyncpg.exceptions.ConnectionDoesNotExistError("gone"), DatabaseUnavailable),
        (asyncpg.exceptions.AdminShutdownError("shutdown"), DatabaseUnavailable),
        (asyncpg.exceptions.CannotConnectNowError("starting"), DatabaseUnavailable),
        (asyncpg.exceptions.TooManyConnectionsError("full"), DatabaseUnavailable),
        (asyncpg.exceptions.InterfaceError("connection is closed"), DatabaseUnavailable),
        (asyncpg.exceptions.InternalClientError("cannot switch"), DatabaseUnavailable),
        (asyncpg.exceptions.UniqueViolationError("dup"), IntegrityError),
        (asyncpg.exceptions.InvalidTextRepresentationError("bad"), InvalidData),
        (asyncpg.exceptions.QueryCanceledError("statement timeout"), StorageError),
    ]
    for exc, expected in cases:
        err = storage_error(exc)
        assert type(err) is expected, (exc, err)
        assert err.__cause__ is exc


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_a_socket_error_of_the_drivers_own_io_is_losing_the_database() -> None:
    """ConnectionRefusedError raised while asyncpg connects reads as DatabaseUnavailable."""
    url = f"postgresql://nobody@127.0.0.1:{_free_port()}/none"
    with pytest.raises(DatabaseUnavailable) as info, translated():
        await asyncpg.connect(url, timeout=5)
    assert isinstance(info.value.__cause__, OSError)


@pytest.mark.postgres
async def test_the_guard_keeps_user_errors_and_reads_a_broken_connection_as_loss(
    db_url: str,
) -> None:
    """connection_guard: a user error on a healthy connection stays the user's; any error once
    the connection broke is DatabaseUnavailable. (Directly: through a transaction pooler the
    backend that one statement ran on may serve the next of any client.)"""
    db = await pool.create_pool(direct_url(db_url))
    try:
        async with db.acquire() as conn:
            with pytest.raises(TimeoutError):
                async with connection_guard(conn):
                    await conn.fetchval("SELECT pg_sleep(5)", timeout=0.05)  # the driver's timeout
            assert await conn.fetchval("SELECT 1") == 1
            with pytest.raises(DatabaseUnavailable):
                async with connection_guard(conn):
                    pid = await conn.fetchval("SELECT pg_backend_pid()")
                    await db.execute("SELECT pg_terminate_backend($1)", pid)
                    await conn.fetchval("SELECT 1")
    finally:
        await db.close()
