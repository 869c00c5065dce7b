"""The audit trail: an append-only `audit` table, one row per action (docs/security.md).

Servers record entries without waiting (`AuditWriter.record`, no I/O on the request path); a
background loop writes them in one statement per batch, within `flush_s` (1 s) of the first
unwritten entry, and once more on shutdown. The window this leaves: a process killed with
SIGKILL loses at most the last second's entries; a database outage keeps them in memory (up to
`max_pending`, oldest dropped first, with a warning) and retries. One-shot commands (the CLI)
write their entries directly (`write`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from tether.runtime.operations.storage_errors import storage_errors
from tether.storage import access
from tether.storage.access import AuditEntry
from tether.storage.driver import Database
from tether.storage.errors import IntegrityError, InvalidData, StorageError

logger = logging.getLogger(__name__)

__all__ = ["AuditEntry", "AuditWriter", "entry", "list_entries", "write"]


_MAX_TEXT = 1000  # characters kept of a recorded name (a tool, a task id) from a request


def _text(value: str | None) -> str | None:
    """A request's text as a `text` column takes it: no lone surrogate (not encodable) and no
    NUL (PostgreSQL refuses it), each replaced by U+FFFD; at most _MAX_TEXT characters."""
    if value is None:
        return None
    if not value.isascii():
        value = value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return value[:_MAX_TEXT].replace("\x00", "\ufffd")


def entry(
    *,
    principal: str,
    surface: str,
    method: str,
    outcome: str,
    tenant: str | None = None,
    tool: str | None = None,
    execution_id: str | None = None,
    error_code: int | None = None,
    remote: str | None = None,
) -> AuditEntry:
    """An entry stamped now."""
    return AuditEntry(
        at=datetime.now(UTC),
        principal=_text(principal) or "",
        surface=surface,
        method=_text(method) or "",
        outcome=outcome,
        tenant=_text(tenant),
        tool=_text(tool),
        execution_id=_text(execution_id),
        error_code=error_code,
        remote=_text(remote),
    )


async def write(db: Database, entries: Sequence[AuditEntry]) -> None:
    """Append entries now. Raises Unavailable."""
    if entries:
        with storage_errors():
            await access.insert_audit(db, entries)


async def list_entries(
    db: Database,
    *,
    since: datetime | None = None,
    principal: str | None = None,
    execution_id: str | None = None,
    limit: int = 100,
) -> list[AuditEntry]:
    """Audit rows newest first, filtered. Raises Unavailable."""
    with storage_errors():
        return await access.list_audit(
            db, since=since, principal=principal, execution_id=execution_id, limit=limit
        )


class AuditWriter:
    """Batches entries and writes them in the background. Run `run()` for the process's
    lifetime; `stop()` makes it write what is left and return."""

    def __init__(
        self, db: Database, *, flush_s: float = 1.0, max_batch: int = 500, max_pending: int = 50_000
    ) -> None:
        self._db = db
        self._flush_s = flush_s
        self._max_batch = max_batch
        self._max_pending = max_pending
        self._pending: list[AuditEntry] = []
        self._wake = asyncio.Event()
        self._stopping = False
        #: Entries written so far (tests wait for it).
        self.written = 0
        self._progress = asyncio.Condition()

    def record(self, item: AuditEntry) -> None:
        """Queue an entry (no I/O)."""
        self._pending.append(item)
        if len(self._pending) > self._max_pending:
            del self._pending[0]
            logger.warning("audit backlog full: dropped the oldest entry")
        if len(self._pending) >= self._max_batch or len(self._pending) == 1:
            self._wake.set()

    async def wait_written(self, count: int) -> None:
        """Return once `count` entries have been written."""
        async with self._progress:
            await self._progress.wait_for(lambda: self.written >= count)

    async def flush(self) -> None:
        """Write every queued entry. Raises DatabaseUnavailable (they stay queued). A batch the
        database refuses (a value it cannot take) is written one entry at a time, and an entry
        refused on its own is dropped with an error: one bad entry must not hold back the
        rest forever (kept and retried, it grew the queue of a server for as long as it ran)."""
        while self._pending:
            batch = self._pending[: self._max_batch]
            try:
                await access.insert_audit(self._db, batch)
                written = len(batch)
            except (InvalidData, IntegrityError):
                written = await self._one_by_one(batch)
            del self._pending[: len(batch)]
            async with self._progress:
                self.written += written
                self._progress.notify_all()

    async def _one_by_one(self, batch: list[AuditEntry]) -> int:
        written = 0
        for i, item in enumerate(batch):
            try:
                await access.insert_audit(self._db, [item])
            except (InvalidData, IntegrityError) as exc:
                logger.error("audit entry refused by the database, dropped: %s (%s)", item, exc)
            except StorageError:
                del self._pending[:i]  # the written and dropped ones; the rest stay queued
                self.written += written
                raise
            else:
                written += 1
        return written

    async def run(self) -> None:
        try:
            while not self._stopping:
                await self._wake.wait()
                self._wake.clear()
                if len(self._pending) < self._max_batch and not self._stopping:
                    # Let a burst gather into one statement, but never past flush_s.
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self._flush_s):
                            await self._wake.wait()
                try:
                    await self.flush()
                except StorageError:
                    logger.warning("audit write failed; %d entries kept", len(self._pending))
                    self._wake.set()
                    await asyncio.sleep(self._flush_s)
        finally:
            with contextlib.suppress(StorageError):
                await self.flush()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
