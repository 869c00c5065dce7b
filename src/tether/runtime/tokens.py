"""The token store: API tokens in the database (`api_tokens`), and each server's cache of them.

A server authenticates from an in-process cache keyed by the SHA-256 of each live token's
secret (`TokenStore.lookup`, no I/O: it is on the `tasks/get` hot path). The cache is loaded at
start and reloaded whenever a token is created or revoked anywhere (NOTIFY on
`tether_tokens`, sent in the same statement as the change), with a periodic reload as the
polling fallback for a notification lost while the listener reconnects. A token's last use is
noted in memory and written at most once a minute per token, off the request path.

What the cache holds per token is built by a factory the caller passes (the app builds its
security principals), so this module knows nothing of security.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Generic, TypeVar

from tether.runtime.errors import Conflict
from tether.runtime.operations.storage_errors import storage_errors
from tether.storage import access
from tether.storage.access import TokenInfo
from tether.storage.driver import Database, Notifications
from tether.storage.errors import IntegrityError, StorageError

logger = logging.getLogger(__name__)

P = TypeVar("P")
#: Builds what the cache holds for a token from (name, role, tenant).
Make = Callable[[str, str, str | None], P]

__all__ = ["TokenExists", "TokenInfo", "TokenStore", "create", "list_all", "revoke"]


class TokenExists(Conflict):
    """A live token already has this name."""


async def create(
    db: Database,
    *,
    name: str,
    role: str,
    tenant: str | None,
    digest: str,
    expires_at: datetime | None,
) -> TokenInfo:
    """Store a token by the hash of its secret (every server's cache reloads).

    Raises:
        TokenExists: a live token has this name.
        Unavailable: the database failed.
    """
    with storage_errors():
        try:
            return await access.insert_token(db, name, role, tenant, digest, expires_at)
        except IntegrityError as exc:
            raise TokenExists(f"a live token is already named {name!r}") from exc


async def list_all(db: Database, *, include_revoked: bool = False) -> list[TokenInfo]:
    """Raises Unavailable."""
    with storage_errors():
        return await access.list_tokens(db, include_revoked=include_revoked)


async def revoke(db: Database, name: str) -> bool:
    """Revoke the live token `name` (every server refuses it once its cache reloads, within
    one notification's latency); False when there is none. Raises Unavailable."""
    with storage_errors():
        return await access.revoke_token(db, name)


class TokenStore(Generic[P]):
    """The cache of the database's tokens. Run `run()` for the process's lifetime."""

    def __init__(
        self,
        db: Database,
        listener: Notifications,
        make: Make[P],
        *,
        refresh_s: float = 30.0,
        touch_every_s: float = 60.0,
        flush_s: float = 5.0,
    ) -> None:
        self._db = db
        self._listener = listener
        self._make = make
        self._refresh_s = refresh_s
        self._touch_every_s = touch_every_s
        self._flush_s = flush_s
        self._by_hash: dict[str, tuple[P, float | None]] = {}
        self._next_touch: dict[str, float] = {}
        self._touched: set[str] = set()
        self._dirty = asyncio.Event()
        self._stopping = asyncio.Event()
        self._reloaded = asyncio.Condition()
        #: Any token row exists (revoked or expired included): authentication is required.
        self.configured = False
        self.loaded = False
        #: Counts completed reloads (tests wait for it to move past a change).
        self.generation = 0

    def __contains__(self, digest: object) -> bool:
        """Whether a live token hashes to `digest` (expiry aside; no last use noted)."""
        return digest in self._by_hash

    def lookup(self, digest: str) -> P | None:
        """The principal of the live, unexpired token whose secret hashes to `digest`."""
        entry = self._by_hash.get(digest)
        if entry is None:
            return None
        principal, expires = entry
        if expires is not None and time.time() >= expires:
            return None
        now = time.monotonic()
        if now >= self._next_touch.get(digest, 0.0):
            self._next_touch[digest] = now + self._touch_every_s
            self._touched.add(digest)
        return principal

    async def reload(self) -> None:
        """Replace the cache with the database's tokens. Raises StorageError."""
        self._dirty.clear()
        rows = await access.load_tokens(self._db)
        self._by_hash = {
            r.hash: (
                self._make(r.name, r.role, r.tenant),
                r.expires_at.timestamp() if r.expires_at is not None else None,
            )
            for r in rows
            if not r.revoked
        }
        self.configured = bool(rows)
        self.loaded = True
        async with self._reloaded:
            self.generation += 1
            self._reloaded.notify_all()

    async def wait_generation(self, generation: int) -> None:
        """Return once `generation` reloads have completed."""
        async with self._reloaded:
            await self._reloaded.wait_for(lambda: self.generation >= generation)

    async def flush(self) -> None:
        """Write the noted last uses. Raises StorageError (the uses stay noted)."""
        if self._touched:
            digests = sorted(self._touched)
            await access.touch_tokens(self._db, digests)
            self._touched.difference_update(digests)

    def _on_change(self, _channel: str, _payload: str) -> None:
        self._dirty.set()

    async def run(self) -> None:
        """Reload on every token change (and every refresh_s), write last uses every flush_s,
        until stop(); then write the last uses once more."""
        unsubscribe = self._listener.subscribe(access.TOKENS_CHANNEL, self._on_change)
        next_refresh = 0.0
        try:
            while not self._stopping.is_set():
                try:
                    if self._dirty.is_set() or time.monotonic() >= next_refresh:
                        next_refresh = time.monotonic() + self._refresh_s
                        await self.reload()
                    await self.flush()
                except StorageError:
                    logger.warning("token cache refresh failed; will retry")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._flush_s):
                        await _first_set(self._dirty, self._stopping)
        finally:
            unsubscribe()
            with contextlib.suppress(StorageError):
                await self.flush()

    def stop(self) -> None:
        self._stopping.set()


async def _first_set(*events: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
