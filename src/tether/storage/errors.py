"""Storage errors. Nothing from asyncpg escapes this layer.

StorageError
 ├── DatabaseUnavailable   the server cannot be reached or went away (retryable)
 ├── LeaseLost             a fenced write found another owner or attempt on the row
 └── IntegrityError        the database refused a write (constraint violation)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg


class StorageError(Exception):
    """A database operation failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (type(self).__doc__ or "").strip().splitlines()[0])


class DatabaseUnavailable(StorageError):
    """The database is unavailable; retry later."""


class LeaseLost(StorageError):
    """The run's lease belongs to another worker or attempt; the write was not applied."""


class IntegrityError(StorageError):
    """The database refused the write."""


class InvalidData(StorageError):
    """The database refused a value."""


_UNAVAILABLE = (
    OSError,
    asyncio.TimeoutError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.InterfaceError,
    # A pooled connection broken by a server shutdown mid-operation (asyncpg 0.32: "cannot
    # switch to state …"); not an InterfaceError subclass.
    asyncpg.exceptions.InternalClientError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.ConnectionFailureError,
    asyncpg.exceptions.TooManyConnectionsError,
)


@contextlib.asynccontextmanager
async def translated() -> AsyncIterator[None]:
    """Translate asyncpg and socket errors raised inside the block into StorageError."""
    try:
        yield
    except _UNAVAILABLE as exc:
        raise DatabaseUnavailable(f"database unavailable: {type(exc).__name__}") from exc
    except asyncpg.exceptions.IntegrityConstraintViolationError as exc:
        raise IntegrityError(str(exc)) from exc
    except asyncpg.exceptions.DataError as exc:
        raise InvalidData(f"invalid value (SQLSTATE {exc.sqlstate})") from exc
    except asyncpg.PostgresError as exc:
        raise StorageError(f"database error {exc.sqlstate}: {exc}") from exc


@contextlib.asynccontextmanager
async def unavailable_only() -> AsyncIterator[None]:
    """Translate only losing the database (not errors of the SQL run inside the block): for
    user code that runs its own statements, whose failures are its own."""
    try:
        yield
    except _UNAVAILABLE as exc:
        raise DatabaseUnavailable(f"database unavailable: {type(exc).__name__}") from exc
