"""Storage errors. Nothing from asyncpg escapes this layer.

StorageError
 ├── DatabaseUnavailable   the server cannot be reached or went away (retryable)
 ├── LeaseLost             a fenced write found another owner or attempt on the row
 ├── IntegrityError        the database refused a write (constraint violation)
 ├── InvalidData           the database refused a value (invalid text or number)
 └── PayloadUnreadable     a sealed payload cannot be opened (sealing.py)
      ├── UnknownKey       its key id is not configured here
      └── TamperedPayload  authentication failed: altered, or moved from another row

One map (`_TO_STORAGE`) turns the driver's errors into these, applied by `translated()` around
every call into asyncpg. Only errors of the database connection itself read as losing the
database: asyncpg's connection errors, and `OSError` / `TimeoutError` only when the driver's
own I/O raised them (a user function raises those too, and its failure is its own).

User code that runs on one of our connections (`ctx.transaction`) is guarded by
`connection_guard(conn)` instead: whatever it raises is the user's error, unless the
connection broke under it, which is losing the database.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from types import MappingProxyType, TracebackType
from typing import Final, Protocol

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


class PayloadUnreadable(StorageError):
    """A stored payload is sealed and cannot be opened here; nothing was read."""


class UnknownKey(PayloadUnreadable):
    """A stored payload is sealed with a key id this process does not have."""


class TamperedPayload(PayloadUnreadable):
    """A stored payload failed authentication: altered, or moved from another row or column."""


_X = asyncpg.exceptions

# The driver's errors → ours, looked up along the raised type's MRO (the most specific entry
# wins). Only types that mean exactly the mapped thing are here: no builtin.
_TO_STORAGE: Final[Mapping[type[Exception], type[StorageError]]] = MappingProxyType(
    {
        # The connection itself: gone, refused, or broken (SQLSTATE class 08 and 57P0x).
        _X.PostgresConnectionError: DatabaseUnavailable,  # incl. ConnectionDoesNotExistError
        _X.CannotConnectNowError: DatabaseUnavailable,
        _X.AdminShutdownError: DatabaseUnavailable,
        _X.CrashShutdownError: DatabaseUnavailable,
        _X.TooManyConnectionsError: DatabaseUnavailable,
        # A closed connection or pool used by our own code ("connection is closed").
        _X.InterfaceError: DatabaseUnavailable,
        # A pooled connection broken by a server shutdown mid-operation (asyncpg 0.32: "cannot
        # switch to state …"); not an InterfaceError subclass.
        _X.InternalClientError: DatabaseUnavailable,
        # The statement.
        _X.IntegrityConstraintViolationError: IntegrityError,
        _X.DataError: InvalidData,
        asyncpg.PostgresError: StorageError,
    }
)

# Socket errors and timeouts mean losing the database only when the driver's own I/O raised
# them (connecting, reading, writing): the traceback passes through asyncpg.
_DRIVER_IO: Final = (OSError, TimeoutError)
_DRIVER_PACKAGE: Final = "asyncpg"
# Connection failures whose text says why (a certificate that failed verification, a server
# that refused TLS or the connection) and holds an address at most, never a credential.
_SAYS_WHY: Final = (ssl.SSLError, ConnectionError)


def _raised_by_driver(exc: BaseException) -> bool:
    tb = exc.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        if module == _DRIVER_PACKAGE or module.startswith(_DRIVER_PACKAGE + "."):
            return True
        tb = tb.tb_next
    return False


def _target(exc: BaseException) -> type[StorageError] | None:
    for cls in type(exc).__mro__:
        found = _TO_STORAGE.get(cls)
        if found is not None:
            return found
    if isinstance(exc, _DRIVER_IO) and _raised_by_driver(exc):
        return DatabaseUnavailable
    return None


def _message(target: type[StorageError], exc: BaseException) -> str:
    if target is DatabaseUnavailable:
        if isinstance(exc, _SAYS_WHY):
            return f"database unavailable: {type(exc).__name__}: {exc}"
        return f"database unavailable: {type(exc).__name__}"
    if target is InvalidData:
        return f"invalid value (SQLSTATE {getattr(exc, 'sqlstate', None)})"
    if target is IntegrityError:
        return str(exc)
    return f"database error {getattr(exc, 'sqlstate', None)}: {exc}"


def storage_error(exc: BaseException) -> StorageError | None:
    """The StorageError a driver error stands for (its cause set), per `_TO_STORAGE`; None for
    anything else (a user's OSError included)."""
    target = _target(exc)
    if target is None:
        return None
    err = target(_message(target, exc))
    err.__cause__ = exc
    return err


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


class _Translated(ErrorMapper):
    """Re-raise the driver's errors raised inside the block as StorageErrors (`_TO_STORAGE`)."""

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None or isinstance(exc, StorageError):
            return
        err = storage_error(exc)
        if err is not None:
            raise err


_TRANSLATED = _Translated()


def translated() -> _Translated:
    """Translate the driver's errors raised inside the block into StorageError."""
    return _TRANSLATED


class _Closable(Protocol):
    def is_closed(self) -> bool: ...


def _is_closed(conn: _Closable) -> bool:
    try:
        return conn.is_closed()
    except _X.InterfaceError:
        # A pooled connection that broke is detached from its proxy at once ("released back
        # to the pool"): it is gone.
        return True


class _ConnectionGuard(ErrorMapper):
    """See `connection_guard`."""

    def __init__(self, conn: _Closable) -> None:
        self._conn = conn

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None or isinstance(exc, StorageError) or not isinstance(exc, Exception):
            return
        if _is_closed(self._conn):
            raise DatabaseUnavailable(f"database unavailable: {type(exc).__name__}") from exc


def connection_guard(conn: _Closable) -> _ConnectionGuard:
    """Guard user code running on `conn`: what it raises stays its own error (a
    FileNotFoundError, a TimeoutError, a failed statement), unless `conn` broke under it: then
    the database was lost and the block raises DatabaseUnavailable."""
    return _ConnectionGuard(conn)
