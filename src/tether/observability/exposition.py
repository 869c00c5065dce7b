"""Serving metrics: the scrape-time gauges read from the database, and the text exposition
(for the app's `/metrics` route and for the standalone `TETHER_METRICS_PORT` listener).

The database gauges come from one `Snapshot` per scrape, fetched by a callable the runtime
provides and cached for `max_age_s`, so a busy scraper costs at most one grouped query a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class QueueBacklog:
    queue: str  # "" for runs outside any admission queue
    depth: int  # runnable runs not yet claimed (queued ones included)
    oldest_age_s: float  # how long the oldest of them has been runnable


@dataclass(frozen=True)
class NotificationBacklog:
    channel: str
    pending: int  # notifications neither delivered nor given up (in flight ones included)
    oldest_age_s: float  # how long ago the oldest of them was written (0 without any)


@dataclass(frozen=True)
class Snapshot:
    """What a scrape reads from the process and the database at once."""

    runs_by_status: Mapping[str, int] = field(default_factory=dict)
    queues: Sequence[QueueBacklog] = ()
    notifications: Sequence[NotificationBacklog] = ()
    database_up: bool = True
    listening: bool = False
    workers_running: int = 0
    pool_size: int = 0
    pool_idle: int = 0
    pool_max: int = 0


Source = Callable[[], Awaitable[Snapshot]]


class _SnapshotCollector(Collector):
    """Turns the latest snapshot into gauge families (registered once per process)."""

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot
        if snap is None:
            return
        runs = GaugeMetricFamily("tether_runs", "Runs in the database by status", labels=["status"])
        for status, count in sorted(snap.runs_by_status.items()):
            runs.add_metric([status], count)
        depth = GaugeMetricFamily(
            "tether_queue_depth", "Runnable runs not yet claimed, by queue", labels=["queue"]
        )
        age = GaugeMetricFamily(
            "tether_queue_oldest_age_seconds",
            "Age of the oldest runnable run not yet claimed, by queue",
            labels=["queue"],
        )
        for q in snap.queues:
            depth.add_metric([q.queue], q.depth)
            age.add_metric([q.queue], q.oldest_age_s)
        pending = GaugeMetricFamily(
            "tether_notifications_pending",
            "Notifications to people neither delivered nor given up, by channel",
            labels=["channel"],
        )
        pending_age = GaugeMetricFamily(
            "tether_notifications_pending_oldest_age_seconds",
            "Age of the oldest notification neither delivered nor given up, by channel",
            labels=["channel"],
        )
        for n in snap.notifications:
            pending.add_metric([n.channel], n.pending)
            pending_age.add_metric([n.channel], n.oldest_age_s)
        yield runs
        yield depth
        yield age
        yield pending
        yield pending_age
        yield _gauge(
            "tether_database_up", "1 when the last scrape reached the database", snap.database_up
        )
        yield _gauge(
            "tether_listen_connected", "1 while the LISTEN connection is in force", snap.listening
        )
        yield _gauge(
            "tether_workers_running", "Claim loops running in this process", snap.workers_running
        )
        pool = GaugeMetricFamily(
            "tether_db_pool_connections", "Pooled database connections by state", labels=["state"]
        )
        pool.add_metric(["idle"], snap.pool_idle)
        pool.add_metric(["busy"], max(snap.pool_size - snap.pool_idle, 0))
        yield pool
        yield _gauge("tether_db_pool_max_connections", "The pool's size limit", snap.pool_max)


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=float(value))


_COLLECTOR: Final = _SnapshotCollector()
REGISTRY.register(_COLLECTOR)


class Scrape:
    """Renders the exposition text, refreshing the database snapshot when it is stale."""

    def __init__(
        self, source: Source, *, registry: CollectorRegistry = REGISTRY, max_age_s: float = 1.0
    ) -> None:
        self._source = source
        self._registry = registry
        self._max_age_s = max_age_s
        self._snapshot: Snapshot | None = None
        self._at = 0.0
        self._lock = asyncio.Lock()

    async def render(self) -> bytes:
        async with self._lock:
            if self._snapshot is None or time.monotonic() - self._at > self._max_age_s:
                self._snapshot = await self._source()
                self._at = time.monotonic()
        _COLLECTOR.snapshot = self._snapshot
        return generate_latest(self._registry)


async def serve(host: str, port: int, scrape: Scrape) -> asyncio.Server:
    """A minimal HTTP listener answering `GET /metrics` (for `tether worker`, or any process
    with TETHER_METRICS_PORT set). Returns the started server; close it to stop."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):
                head = await reader.readuntil(b"\r\n\r\n")
            parts = head.split(b" ", 2)
            if len(parts) >= 2 and parts[0] == b"GET" and parts[1].split(b"?")[0] == b"/metrics":
                body, status = await scrape.render(), b"200 OK"
            else:
                body, status = b"not found\n", b"404 Not Found"
            writer.write(
                b"HTTP/1.1 "
                + status
                + b"\r\nContent-Type: "
                + CONTENT_TYPE.encode()
                + b"\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\nConnection: close\r\n\r\n"
                + body
            )
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass
        except Exception:  # a scrape's failure must not end the listener
            logger.exception("metrics scrape failed")
        finally:
            with contextlib.suppress(OSError):
                writer.close()

    return await asyncio.start_server(handle, host, port)


@contextlib.asynccontextmanager
async def serving(host: str, port: int | None, scrape: Scrape) -> AsyncIterator[None]:
    """With a port (TETHER_METRICS_PORT), also serve /metrics there while the block runs
    (plain, no security layer: bind it to a network only the scraper reaches)."""
    if port is None:
        yield
        return
    server = await serve(host, port, scrape)
    try:
        yield
    finally:
        server.close()
        await server.wait_closed()
