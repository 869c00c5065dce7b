"""LISTEN on one dedicated connection (never a pooled one), reconnecting with backoff.

Notifications are hints: payloads are ids, readers re-fetch rows, and every consumer keeps a
polling fallback, so a notification lost while reconnecting costs latency, never correctness.

A wake-up this process sends itself is delivered to its own subscribers at once (`echo`),
ahead of the NOTIFY that carries it to other processes: a run started or settled here reaches
this process's worker or waiter without the round trip through PostgreSQL. The NOTIFY's own
delivery here is then skipped, once per echo, so nothing is handled twice.

The LISTEN connection goes where the URL's route says (`pool.Route.listen_dsn`). When that is
another URL, the listener checks on each connection that a NOTIFY sent through the database URL
reaches it before it reports `ready`: a LISTEN on another database, on a replica or through a
transaction pooler hears nothing, and would leave every wake-up to polling without a word.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable, Iterable
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

import asyncpg

from tether.storage.driver import Callback
from tether.storage.errors import StorageError
from tether.storage.pool import connect, route_of

logger = logging.getLogger(__name__)

READY_CHANNEL: Final = "tether_ready"  # a run became runnable (payload: execution id)
CHANGE_CHANNEL: Final = "tether_change"  # a run's visible state changed (payload: execution id)
UPDATE_CHANNEL: Final = "tether_update"  # an update finished (payload: update id)
TOKENS_CHANNEL: Final = "tether_tokens"  # an API token was created or revoked (payload: its id)
OUTBOX_CHANNEL: Final = "tether_outbox"  # notifications to people are due (payload: empty)
PROBE_CHANNEL: Final = "tether_probe"  # the listener's delivery check (payload: a random token)
PROBE_TIMEOUT_S: Final = 5.0  # how long a delivery check waits for its NOTIFY, by default
_ECHO_MAX: Final = 10_000  # echoed wake-ups awaiting their NOTIFY, at most


class _Unheard(Exception):
    """A NOTIFY sent through the database URL did not reach the LISTEN connection."""


def _where(dsn: str) -> str:
    """host:port/database of `dsn` (a socket directory as the host), without its
    credentials, for a log line."""
    try:
        parts = urlsplit(dsn)
        host = parts.hostname or dict(parse_qsl(parts.query)).get("host", "")
        port = parts.port
    except ValueError:
        return "an unreadable URL"
    return f"{host}:{port}{parts.path}" if port else f"{host}{parts.path}"


class Listener:
    """Delivers NOTIFY payloads to subscribers; `ready` is set while LISTEN is in force.

    The asyncpg implementation of `driver.Notifications`. `max_backoff`: the longest wait
    between reconnects; `check_timeout_s`: how long the delivery check (when LISTEN goes to
    another URL) waits for its NOTIFY."""

    def __init__(
        self, dsn: str, *, max_backoff: float = 5.0, check_timeout_s: float = PROBE_TIMEOUT_S
    ) -> None:
        self._dsn = dsn
        self._check_timeout_s = check_timeout_s
        self._subscribers: dict[str, list[Callback]] = {}
        self._max_backoff = max_backoff
        self.ready = asyncio.Event()
        self._stopping = asyncio.Event()
        self._lost = asyncio.Event()
        self._echoed: dict[tuple[str, str], int] = {}  # delivered ahead, NOTIFY not yet heard

    def subscribe(self, channel: str, callback: Callback) -> Callable[[], None]:
        """Register `callback` for `channel`; returns a function that unsubscribes it."""
        self._subscribers.setdefault(channel, []).append(callback)

        def unsubscribe() -> None:
            callbacks = self._subscribers.get(channel, [])
            if callback in callbacks:
                callbacks.remove(callback)

        return unsubscribe

    def echo(self, notes: Iterable[tuple[str, str]]) -> None:
        """Deliver `notes` (channel, payload) here now, before the caller sends them as NOTIFY;
        each one's NOTIFY, when heard, is then skipped once (a transaction's identical
        notifications arrive as one)."""
        for channel, payload in dict.fromkeys(notes):
            if self.ready.is_set():  # else its NOTIFY will not be heard here: nothing to skip
                key = (channel, payload)
                self._echoed[key] = self._echoed.get(key, 0) + 1
                if len(self._echoed) > _ECHO_MAX:  # the oldest: its NOTIFY was lost
                    del self._echoed[next(iter(self._echoed))]
            self._dispatch(None, 0, channel, payload)

    def _heard(self, conn: Any, pid: int, channel: str, payload: object) -> None:
        key = (channel, str(payload))
        left = self._echoed.get(key)
        if left is None:
            self._dispatch(conn, pid, channel, payload)
        elif left > 1:
            self._echoed[key] = left - 1
        else:
            del self._echoed[key]

    def _dispatch(self, _conn: Any, _pid: int, channel: str, payload: object) -> None:
        for callback in list(self._subscribers.get(channel, ())):
            try:
                callback(channel, str(payload))
            except Exception:  # a subscriber's bug must not kill the listener
                logger.exception("notification callback failed on %s", channel)

    def _on_termination(self, _conn: Any) -> None:
        self._lost.set()

    async def run(self) -> None:
        """Listen until stop(); reconnect with exponential backoff when the connection drops."""
        backoff = 0.1
        channels = (READY_CHANNEL, CHANGE_CHANNEL, UPDATE_CHANNEL, TOKENS_CHANNEL, OUTBOX_CHANNEL)
        while not self._stopping.is_set():
            conn: asyncpg.Connection | None = None
            try:
                target = route_of(self._dsn).listen_dsn or self._dsn
                conn = await connect(target)
                conn.add_termination_listener(self._on_termination)
                self._echoed.clear()  # what was echoed before this connection is not coming
                for channel in channels:
                    await conn.add_listener(channel, self._heard)
                if target != self._dsn:
                    await self._check_delivery(conn, target)
                self._lost.clear()
                self.ready.set()
                # Wake everyone once: something may have happened while we were not listening.
                for channel in channels:
                    self._dispatch(None, 0, channel, "")
                backoff = 0.1
                await _first(self._stopping.wait(), self._lost.wait(), self._probe(conn))
            except _Unheard as exc:
                logger.error("%s; retrying in %.1fs", exc, backoff)
            except Exception as exc:  # noqa: BLE001 — any failure of this connection: reconnect
                # Not only the driver's connection errors: during a database restart asyncpg
                # also raised InternalClientError ("cannot switch to state 12; another operation
                # is in progress") from the probe, which ended the whole server (chaos, outage).
                failure = type(exc).__name__
                if isinstance(exc, StorageError):  # our message says why (never a credential)
                    failure = f"{failure}: {exc}"
                logger.warning("listener failed (%s); retrying in %.1fs", failure, backoff)
            finally:
                self.ready.clear()
                if conn is not None and not conn.is_closed():
                    conn.terminate()
            if not self._stopping.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), backoff)
                backoff = min(backoff * 2, self._max_backoff)

    async def _check_delivery(self, conn: asyncpg.Connection, target: str) -> None:
        """Raise _Unheard unless a NOTIFY sent on a connection to the database URL reaches
        `conn` (LISTENing at `target`) within the check's timeout."""
        token = secrets.token_hex(8)
        heard = asyncio.get_running_loop().create_future()

        def hear(_conn: Any, _pid: int, _channel: str, payload: object) -> None:
            if payload == token and not heard.done():
                heard.set_result(None)

        # It stays on the connection: nothing else is sent on its channel.
        await conn.add_listener(PROBE_CHANNEL, hear)
        sender = await connect(self._dsn)
        try:
            await sender.execute("SELECT pg_notify($1, $2)", PROBE_CHANNEL, token)
        finally:
            sender.terminate()  # at once, also when cancelled: nothing is left to wait for
        try:
            await asyncio.wait_for(heard, self._check_timeout_s)
        except TimeoutError:
            raise _Unheard(
                f"LISTEN at {_where(target)} heard no notification sent through "
                f"{_where(self._dsn)} within {self._check_timeout_s:g} s: the LISTEN URL must "
                "reach the same database directly (not another database, not a replica, not "
                "through a transaction pooler)"
            ) from None

    async def _probe(self, conn: asyncpg.Connection) -> None:
        """Detect a dead socket that produced no termination callback (e.g. a server restart)."""
        while True:
            await asyncio.sleep(5.0)
            await asyncio.wait_for(conn.fetchval("SELECT 1"), 5.0)

    def stop(self) -> None:
        self._stopping.set()


async def _first(*aws: Any) -> None:
    """Return when the first awaitable finishes; cancel the rest; re-raise its error."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
