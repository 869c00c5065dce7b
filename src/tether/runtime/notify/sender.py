"""The sender: claims due notifications of the channels this process knows, delivers each,
and marks it sent, or due again after a backoff, or given up.

Delivery is at least once. A claim is a lease (`SenderSettings.lease_s`), fenced by the
attempt it counts: a sender that dies holding one (or hangs past it) leaves the row due again
when the lease ends, and the next claim delivers it again with the same delivery id. The
window for such a repeat is the time between the receiver's reply and the mark, one short
statement; the receiver closes it by dropping a delivery id it has seen (exactly once over
HTTP or SMTP is impossible: a reply lost in transit looks like a failure to the sender).
No attempt outlives its lease: each is bounded by its channel's timeout, which the lease
exceeds.

Wake-ups come from the outbox's NOTIFY (sent by the transaction that writes a row), with
polling as the fallback; a backoff this sender sets wakes it when it is due.

Every attempt is counted by what it came to (delivered, retried, given up), and a delivery's
latency from the event is observed (`metrics.notification_attempt`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Mapping
from datetime import UTC, datetime

import httpx
import orjson

from tether.observability import metrics
from tether.runtime.ids import new_worker_id
from tether.runtime.notify import messages, transports
from tether.runtime.notify.channels import EmailChannel, Resolved, SlackChannel, WebhookChannel
from tether.runtime.notify.config import SenderSettings
from tether.runtime.notify.links import Links
from tether.storage import outbox
from tether.storage.driver import Database, Notifications
from tether.storage.errors import StorageError
from tether.storage.notify import OUTBOX_CHANNEL
from tether.storage.outbox import Notification

logger = logging.getLogger(__name__)

_MARK_TRIES = 3  # a mark that meets a database error is tried again within the lease


def backoff(attempt: int, settings: SenderSettings, asked_s: float | None = None) -> float:
    """Seconds before attempt `attempt + 1`: the base doubled per attempt, jittered to 50-100%
    (so failures together do not retry together), at least what the receiver asked, and at
    most `retry_max_s`."""
    delay = settings.retry_base_s * 2.0 ** max(attempt - 1, 0)
    delay = min(delay, settings.retry_max_s) * (0.5 + random.random() / 2)  # noqa: S311 — jitter
    if asked_s is not None:
        delay = max(delay, asked_s)
    return min(delay, settings.retry_max_s)


class Sender:
    """One process's delivery loop over the channels it holds (`channels`, by name)."""

    def __init__(
        self,
        pool: Database,
        channels: Mapping[str, Resolved],
        links: Links,
        settings: SenderSettings | None = None,
        *,
        listener: Notifications | None = None,
        owner: str | None = None,
    ) -> None:
        self.pool = pool
        self.channels = dict(channels)
        self.links = links
        self.settings = settings or SenderSettings()
        self.owner = owner or new_worker_id()
        self._listener = listener
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._stopping = asyncio.Event()
        self._in_flight: set[asyncio.Task[None]] = set()
        self._next_due: float | None = None  # monotonic time of the earliest retry set here
        slowest = max((_timeout(r) for r in self.channels.values()), default=0.0)
        if slowest >= self.settings.lease_s:
            raise ValueError(
                f"notification lease ({self.settings.lease_s} s) must exceed every channel's "
                f"timeout (up to {slowest} s)"
            )

    def stop(self) -> None:
        """Claim nothing more; deliveries in flight finish (or end with the task group)."""
        self._stopping.set()
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """Deliver until stop(); database errors are logged and retried."""
        if not self.channels:
            return
        unsubscribe = (
            self._listener.subscribe(OUTBOX_CHANNEL, lambda _c, _p: self._wake.set())
            if self._listener is not None
            else None
        )
        try:
            limits = httpx.Limits(max_connections=self.settings.concurrency)
            async with (
                httpx.AsyncClient(limits=limits, trust_env=False) as client,
                asyncio.TaskGroup() as tg,
            ):
                await self._loop(client, tg)
        finally:
            if unsubscribe is not None:
                unsubscribe()

    async def _loop(self, client: httpx.AsyncClient, tg: asyncio.TaskGroup) -> None:
        names = list(self.channels)
        failures = 0
        while not self._stopping.is_set():
            room = self.settings.concurrency - len(self._in_flight)
            claimed: list[Notification] = []
            if room > 0:
                self._wake.clear()
                self._room.clear()
                want = min(room, self.settings.batch)
                try:
                    claimed = await outbox.claim(
                        self.pool, self.owner, names, want, self.settings.lease_s
                    )
                    failures = 0
                except StorageError:
                    failures += 1
                    logger.warning("notification claim failed; retrying")
                    await self._pause(min(self.settings.poll_s * failures, 30.0))
                    continue
                for note in claimed:
                    task = tg.create_task(self._deliver(client, note), name="tether-notify")
                    self._in_flight.add(task)
                    task.add_done_callback(self._finished)
                if len(claimed) == want:
                    continue  # more may be due
            await self._pause(self._idle_s())

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._in_flight.discard(task)
        self._room.set()

    def _idle_s(self) -> float:
        """How long to wait for a wake-up: the poll interval, or less when a retry set here
        falls due sooner."""
        wait = self.settings.poll_s
        if self._next_due is not None:
            wait = min(wait, max(self._next_due - time.monotonic(), 0.0))
        return wait

    async def _pause(self, seconds: float) -> None:
        """Until a wake-up, a freed slot when full, stop(), or `seconds`."""
        events = [self._wake.wait(), self._stopping.wait()]
        if len(self._in_flight) >= self.settings.concurrency:
            events.append(self._room.wait())
        tasks = [asyncio.ensure_future(e) for e in events]
        try:
            await asyncio.wait(tasks, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
        if self._next_due is not None and self._next_due <= time.monotonic():
            self._next_due = None

    async def _deliver(self, client: httpx.AsyncClient, note: Notification) -> None:
        resolved = self.channels[note.channel]
        try:
            outcome = await self._send(client, resolved, note)
        except Exception:  # a rendering bug must not end the loop: the row is retried
            logger.exception("notification %s could not be rendered", note.delivery_id)
            outcome = transports.Outcome(False, "internal error")
        kind = resolved.channel.type
        if outcome.delivered:
            metrics.notification_attempt(kind, note.channel, "delivered", note.created_at)
            await self._mark(note)
            return
        delay: float | None = None
        if not outcome.retry or note.attempt >= self.settings.max_attempts:
            metrics.notification_attempt(kind, note.channel, "given_up", note.created_at)
            logger.warning(
                "notification %s to channel %r given up after %d attempts: %s",
                note.delivery_id,
                note.channel,
                note.attempt,
                outcome.error,
            )
        else:
            metrics.notification_attempt(kind, note.channel, "retried", note.created_at)
            delay = backoff(note.attempt, self.settings, outcome.after_s)
            due = time.monotonic() + delay
            self._next_due = due if self._next_due is None else min(self._next_due, due)
        with contextlib.suppress(StorageError):
            if not await outbox.retry(self.pool, note, self.owner, delay, outcome.error):
                logger.info("notification %s: claim ran out before its retry", note.delivery_id)

    async def _mark(self, note: Notification) -> None:
        for attempt in range(_MARK_TRIES):
            try:
                if not await outbox.mark_sent(self.pool, note, self.owner):
                    logger.warning(
                        "notification %s was delivered after its claim ran out: another "
                        "sender may deliver it again",
                        note.delivery_id,
                    )
                return
            except StorageError:
                if attempt + 1 == _MARK_TRIES:
                    logger.warning(
                        "notification %s delivered but not marked: it will be delivered again",
                        note.delivery_id,
                    )
                    return
                await asyncio.sleep(0.2 * (attempt + 1))

    async def _send(
        self, client: httpx.AsyncClient, resolved: Resolved, note: Notification
    ) -> transports.Outcome:
        channel = resolved.channel
        if isinstance(channel, WebhookChannel):
            assert resolved.url is not None and resolved.secret is not None  # noqa: S101
            body, headers = messages.webhook_request(
                note, self.links, resolved.secret.reveal(), int(time.time())
            )
            return await transports.post(
                client, resolved.url.reveal(), body, headers, channel.timeout_s
            )
        if isinstance(channel, SlackChannel):
            assert resolved.url is not None  # noqa: S101 — resolve() set it
            body = orjson.dumps(messages.slack_message(note, self.links))
            headers = {"Content-Type": "application/json"}
            return await transports.post(
                client, resolved.url.reveal(), body, headers, channel.timeout_s
            )
        if isinstance(channel, EmailChannel):
            message = messages.email_message(
                note, self.links, channel.sender, note.recipient, datetime.now(UTC)
            )
            return await transports.send_email(resolved, message, note.recipient)
        return transports.Outcome(False, f"unknown channel type {channel.type!r}", retry=False)


def _timeout(resolved: Resolved) -> float:
    return float(getattr(resolved.channel, "timeout_s", 0.0))
