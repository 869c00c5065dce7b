"""A checkpoint write handed to the group writer, and the futures that wait for it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from tether.storage.rows import Checkpoint, CheckpointResult


@dataclass
class Pending:
    """A write submitted to the group writer (`checkpoints.CheckpointWriter.submit`): `done`
    resolves to its result once it committed."""

    execution_id: str
    owner: str
    attempt: int
    seen_event_id: int
    cp: Checkpoint
    done: asyncio.Future[CheckpointResult] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    _waiters: list[asyncio.Future[None]] = field(default_factory=list)

    def landed(self) -> asyncio.Future[None]:
        """A future of its own, resolved (None) as `done` is: cancelling it leaves the write
        alone, as waiting on `done` through `asyncio.wait` would, one hand-off sooner."""
        waiter: asyncio.Future[None] = self.done.get_loop().create_future()
        if self.done.done():
            waiter.set_result(None)
        else:
            self._waiters.append(waiter)
        return waiter

    def wake(self) -> None:
        """Resolve the `landed` futures (once `done` is resolved)."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
