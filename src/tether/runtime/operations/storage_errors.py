"""The storage → runtime error map every operation runs its statements under."""

from __future__ import annotations

from types import TracebackType

from tether.runtime import errors
from tether.storage.errors import (
    DatabaseUnavailable,
    ErrorMapper,
    InvalidData,
    StorageError,
    storage_error,
)


class _StorageErrors(ErrorMapper):
    """Storage failures (also those raised outside a query, e.g. acquiring a connection while
    the server is down) leave as Unavailable, which every surface reports as retryable."""

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            return
        err = exc if isinstance(exc, StorageError) else storage_error(exc)
        if isinstance(err, DatabaseUnavailable):
            raise errors.Unavailable() from err
        if isinstance(err, InvalidData):
            raise errors.InvalidInput(
                "the database refused a value (invalid text or number)"
            ) from err
        if err is not None:
            raise errors.Unavailable(f"database error: {err}") from err


_STORAGE_ERRORS = _StorageErrors()


def storage_errors() -> _StorageErrors:
    """Map storage failures raised inside the block to runtime errors (sync or async with)."""
    return _STORAGE_ERRORS
