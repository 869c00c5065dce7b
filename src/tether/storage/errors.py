"""Storage errors. Nothing from asyncpg escapes this layer.

StorageError
 ├── DatabaseUnavailable   the server cannot be reached or went away (retryable)
 ├── LeaseLost             a fenced write found another owner or attempt on the row
 └── IntegrityError        the database refused a write (constraint violation)
"""

from __future__ import annotations

import asyncio
from types import TracebackType

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


class ErrorMapper:
    """A stateless context manager, for `with` and `async with`, whose __exit__ re-raises the
    errors of its block as other errors. A class rather than a generator: these wrap every read
    (tasks/get), and one instance serves every use."""

    def __enter__(self) -> None:
        return None

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(kind, exc, tb)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        raise NotImplementedError


def _unavailable(exc: BaseException) -> DatabaseUnavailable:
    return DatabaseUnavailable(f"database unavailable: {type(exc).__name__}")


def storage_error(exc: BaseException) -> StorageError | None:
    """The StorageError an asyncpg or socket error stands for (its cause set); None for
    anything else."""
    err: StorageError
    if isinstance(exc, _UNAVAILABLE):
        err = _unavailable(exc)
    elif isinstance(exc, asyncpg.exceptions.IntegrityConstraintViolationError):
        err = IntegrityError(str(exc))
    elif isinstance(exc, asyncpg.exceptions.DataError):
        err = InvalidData(f"invalid value (SQLSTATE {exc.sqlstate})")
    elif isinstance(exc, asyncpg.PostgresError):
        err = StorageError(f"database error {exc.sqlstate}: {exc}")
    else:
        return None
    err.__cause__ = exc
    return err


class _Translated(ErrorMapper):
    """Translate asyncpg and socket errors raised inside the block into StorageError."""

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        err = storage_error(exc) if exc is not None else None
        if err is not None:
            raise err


class _UnavailableOnly(ErrorMapper):
    """Translate only losing the database (not errors of the SQL run inside the block): for
    user code that runs its own statements, whose failures are its own."""

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if isinstance(exc, _UNAVAILABLE):
            raise _unavailable(exc) from exc


_TRANSLATED = _Translated()
_UNAVAILABLE_ONLY = _UnavailableOnly()


def translated() -> _Translated:
    """Translate asyncpg and socket errors raised inside the block into StorageError."""
    return _TRANSLATED


def unavailable_only() -> _UnavailableOnly:
    """Translate only losing the database inside the block (see _UnavailableOnly)."""
    return _UNAVAILABLE_ONLY
