"""The handle a run's context writes through (the executor's `RunIO` implements it)."""

from __future__ import annotations

import contextlib
from typing import Protocol

from tether.storage.driver import Connection
from tether.storage.repo import Checkpoint, CheckpointResult


class RunIO(Protocol):
    """The executor's fenced write handle for one claimed run."""

    seen_event_id: int

    async def write(self, cp: Checkpoint) -> CheckpointResult: ...

    async def write_in(self, conn: Connection, cp: Checkpoint) -> CheckpointResult: ...

    async def write_behind(self, cp: Checkpoint) -> None:
        """Start writing `cp` without waiting for its commit; the next write waits first."""
        ...

    async def drain(self) -> CheckpointResult | None:
        """Wait for the write `write_behind` left in flight (its result, None when there was
        none); raises what it raised."""
        ...

    def acquire(self) -> contextlib.AbstractAsyncContextManager[Connection]:
        """A pooled connection; failing to get or give it back raises StorageError."""
        ...
