"""Prometheus metrics: definitions and the recording calls the runtime and the app make.

Names follow Prometheus conventions (units in names, `_total` for counters); labels are
bounded: workflow names come from the registry, methods and tools from the catalog (callers
pass `other` for anything else), never a run id. `enabled` switches recording off (the
benchmark's baseline; `TETHER_METRICS=false`).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tether.observability.series import Cell, CounterSeries, Series

# Step and request latencies: milliseconds to minutes; runs: seconds to days.
_FAST: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_SLOW: Final = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 86400, 7 * 86400)
# A notification's latency: milliseconds when delivered at once (0.2: its 200 ms target), to
# hours through retries (TETHER_NOTIFY_MAX_ATTEMPTS attempts up to TETHER_NOTIFY_RETRY_MAX_S apart).
_NOTIFY: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)

# The run, attempt and step metrics: recorded per event as additions (observability/series.py).
_RUNS: Final = Series()
RUNS_STARTED: Final = _RUNS.counter(
    "tether_runs_started", "Runs claimed for the first time, by workflow", ["workflow"]
)
RUNS_ENDED: Final = _RUNS.counter(
    "tether_runs_ended",
    "Runs that reached an end, by workflow and end status",
    ["workflow", "status"],
)
RUN_ATTEMPTS: Final = _RUNS.counter(
    "tether_run_attempts",
    "Run attempts (one claim each) by workflow and outcome: the status it left the run in "
    "(waiting = parked, pending = retry or timer), lost, or crashed",
    ["workflow", "outcome"],
)
RUN_DURATION: Final = _RUNS.histogram(
    "tether_run_duration_seconds",
    "From a run's creation to its end",
    ["workflow", "status"],
    _SLOW,
)
ATTEMPT_DURATION: Final = _RUNS.histogram(
    "tether_run_attempt_duration_seconds",
    "One claim of a run: replay until it parks or ends",
    ["workflow"],
    _FAST,
)
STEP_DURATION: Final = _RUNS.histogram(
    "tether_step_duration_seconds",
    "One execution of a step (replays are not counted)",
    ["workflow", "outcome"],
    _FAST,
)
LEASE_RECOVERIES: Final = _RUNS.counter(
    "tether_lease_recoveries",
    "Runs claimed after their previous worker's lease expired (it died or lost the database)",
    ["workflow"],
)
LEASES_LOST: Final = _RUNS.counter(
    "tether_leases_lost", "Runs this process stopped because it lost their lease", ["workflow"]
)
RUNS_ABANDONED: Final = _RUNS.counter(
    "tether_runs_abandoned",
    "Poison runs the claim ended failed (TETHER_MAX_RECOVERY_ATTEMPTS lost workers in a row)",
    ["workflow"],
)
REGISTRY.register(_RUNS)
_LOCK: Final = _RUNS.lock
SSE_STREAMS: Final = Gauge("tether_sse_streams", "Open SSE response streams")
SUBSCRIPTIONS_DROPPED: Final = Counter(
    "tether_subscriptions_dropped",
    "subscriptions/listen streams the server ended because the client took no frame in time",
    ["reason"],
)
# Remote calls (runtime/remote): labelled by the remote's configured name, never a task id.
REMOTE_REQUESTS: Final = Counter(
    "tether_remote_requests",
    "Requests to remote MCP servers by remote, method and outcome (ok, rpc_error, refused, "
    "transport)",
    ["remote", "method", "outcome"],
)
REMOTE_REQUEST_DURATION: Final = Histogram(
    "tether_remote_request_duration_seconds",
    "Latency of one request to a remote MCP server",
    ["remote", "method"],
    buckets=_FAST,
)
REMOTE_CALLS_ENDED: Final = Counter(
    "tether_remote_calls_ended",
    "Remote tool calls that reached an end, by remote and outcome (completed, the error's "
    "type, or cancel_<reply> when the run was cancelled)",
    ["remote", "outcome"],
)
# Notifications to people (runtime/notify): labelled by the channel's type and configured name.
#: How a notification's delivery attempt ends (tether_notification_attempts' outcome label).
NOTIFY_OUTCOMES: Final = ("delivered", "retried", "given_up")
NOTIFICATION_ATTEMPTS: Final = Counter(
    "tether_notification_attempts",
    "Delivery attempts of notifications to people by channel type, channel and outcome "
    "(delivered, retried: due again after a backoff, given_up: no attempt follows)",
    ["type", "channel", "outcome"],
)
NOTIFICATION_LATENCY: Final = Histogram(
    "tether_notification_latency_seconds",
    "From a notification's event (the transaction that wrote it) to its delivery",
    ["type", "channel"],
    buckets=_NOTIFY,
)
#: What a listen stream follows (the label values of tether_subscription_feeds).
FEED_KINDS: Final = ("task", "resource", "tools_list")

enabled = True


# Per event: the cells of its label values from a dict (the series made on first use), then
# additions under the one lock: no `.labels()` call, no per-series lock. `acquire`/`release`
# rather than `with`: a `with` makes two bound methods an event (about 1 k instructions).
_ATTEMPT_CELLS: Final[dict[tuple[str, str], tuple[Cell, Cell]]] = {}  # count, duration
_END_CELLS: Final[dict[tuple[str, str], tuple[Cell, Cell]]] = {}


def run_claimed(workflow: str, attempt: int, lost_leases: int) -> None:
    """A worker claimed a run to execute it."""
    if not enabled:
        return
    if attempt == 1:
        _count(RUNS_STARTED, workflow)
    if lost_leases:
        _count(LEASE_RECOVERIES, workflow)


def run_abandoned(workflow: str) -> None:
    if enabled:
        _count(RUNS_ABANDONED, workflow)


def attempt_finished(workflow: str, outcome: str, seconds: float) -> None:
    """One claim ended with `outcome` (the run's new status, `lost` or `crashed`)."""
    if not enabled:
        return
    cells = _ATTEMPT_CELLS.get((workflow, outcome))
    if cells is None:
        cells = (RUN_ATTEMPTS.cell(workflow, outcome), ATTEMPT_DURATION.cell(workflow))
        _ATTEMPT_CELLS[(workflow, outcome)] = cells
    count, duration = cells
    _RUNS.tally(count, duration, ATTEMPT_DURATION.bounds, seconds)
    if outcome == "lost":
        _count(LEASES_LOST, workflow)


def run_ended(workflow: str, status: str, created_at: datetime) -> None:
    """A run created at `created_at` (an aware datetime) reached an end with `status`."""
    if not enabled:
        return
    seconds = time.time() - created_at.timestamp()
    cells = _END_CELLS.get((workflow, status))
    if cells is None:
        cells = (RUNS_ENDED.cell(workflow, status), RUN_DURATION.cell(workflow, status))
        _END_CELLS[(workflow, status)] = cells
    count, duration = cells
    _RUNS.tally(count, duration, RUN_DURATION.bounds, seconds)


def step_finished(workflow: str, outcome: str, seconds: float) -> None:
    if not enabled:
        return
    key = (workflow, outcome)
    duration = STEP_DURATION.cells.get(key) or STEP_DURATION.cell(*key)
    _RUNS.tally(None, duration, STEP_DURATION.bounds, seconds)


def _count(counter: CounterSeries, *values: str) -> None:
    cell = counter.cells.get(values) or counter.cell(*values)
    _LOCK.acquire()
    try:
        cell[0] += 1.0
    finally:
        _LOCK.release()


def request_finished(method: str, tool: str, outcome: str, seconds: float) -> None:
    """One MCP request ended (`tether_mcp_requests_total`, its latency histogram)."""
    if enabled:
        _REQUESTS.add(method, tool, outcome, seconds)


def remote_request(remote: str, method: str, outcome: str, seconds: float) -> None:
    """One request to a remote ended with `outcome`."""
    if enabled:
        REMOTE_REQUESTS.labels(remote, method, outcome).inc()
        REMOTE_REQUEST_DURATION.labels(remote, method).observe(seconds)


def remote_call_ended(remote: str, outcome: str) -> None:
    """A remote tool call ended with `outcome`."""
    if enabled:
        REMOTE_CALLS_ENDED.labels(remote, outcome).inc()


def notification_attempt(
    channel_type: str, channel: str, outcome: str, created_at: datetime
) -> None:
    """One delivery attempt of a notification written at `created_at` (an aware datetime, the
    database's clock) ended with `outcome` (one of NOTIFY_OUTCOMES); a delivery also records
    the time since then."""
    if not enabled:
        return
    NOTIFICATION_ATTEMPTS.labels(channel_type, channel, outcome).inc()
    if outcome == "delivered":
        seconds = max(time.time() - created_at.timestamp(), 0.0)  # clocks of two hosts
        NOTIFICATION_LATENCY.labels(channel_type, channel).observe(seconds)


def stream_changed(delta: int) -> None:
    """An SSE response stream opened (+1) or closed (-1)."""
    SSE_STREAMS.inc(delta)


def subscription_dropped(reason: str) -> None:
    if enabled:
        SUBSCRIPTIONS_DROPPED.labels(reason).inc()


@dataclass(frozen=True)
class SubscriptionCounts:
    """What one process's open `subscriptions/listen` streams hold, read at scrape time."""

    streams: int = 0
    feeds: tuple[int, int, int] = (0, 0, 0)  # by FEED_KINDS: task ids, resource URIs, tool list
    watched_runs: int = 0  # execution ids the change hub wakes streams for


class SubscriptionSource(Protocol):
    def metric_counts(self) -> SubscriptionCounts: ...


class _SubscriptionCollector(Collector):
    """Sums the counts of every live subscription service of the process (held weakly: a
    server that stopped drops out by itself). Read at scrape time, so nothing drifts."""

    def __init__(self) -> None:
        self.sources: weakref.WeakSet[SubscriptionSource] = weakref.WeakSet()

    def collect(self) -> Iterator[Metric]:
        counts = [source.metric_counts() for source in list(self.sources)]
        yield GaugeMetricFamily(
            "tether_subscriptions",
            "Open subscriptions/listen streams",
            value=sum(c.streams for c in counts),
        )
        feeds = GaugeMetricFamily(
            "tether_subscription_feeds",
            "What open listen streams follow: task ids, resource URIs, tool list changes",
            labels=["kind"],
        )
        for i, kind in enumerate(FEED_KINDS):
            feeds.add_metric([kind], sum(c.feeds[i] for c in counts))
        yield feeds
        yield GaugeMetricFamily(
            "tether_subscription_watched_runs",
            "Runs whose changes wake a listen stream (ids the change hub routes)",
            value=sum(c.watched_runs for c in counts),
        )


_SUBSCRIPTIONS: Final = _SubscriptionCollector()
REGISTRY.register(_SUBSCRIPTIONS)


def count_subscriptions(source: SubscriptionSource) -> None:
    """Report `source`'s open streams in the subscription gauges while it lives."""
    _SUBSCRIPTIONS.sources.add(source)


class _RequestCollector(Series):
    """`tether_mcp_requests_total` and `tether_mcp_request_duration_seconds`, kept as plain
    numbers and turned into metric families at scrape time. On the `tasks/get` hot path a
    request then costs a dict lookup, a bisect and a few additions under one lock, where
    prometheus_client's labelled children took three locks and a dozen calls."""

    def __init__(self, buckets: tuple[float, ...]) -> None:
        super().__init__()
        self.count = self.counter(
            "tether_mcp_requests",
            "MCP requests by method, tool (tools/call) and outcome",
            ["method", "tool", "outcome"],
        )
        self.latency = self.histogram(
            "tether_mcp_request_duration_seconds",
            "MCP request latency by method and tool",
            ["method", "tool"],
            buckets,
        )
        self.bounds = self.latency.bounds
        self._series: dict[tuple[str, str, str], tuple[Cell, Cell]] = {}  # both, by key

    def add(self, method: str, tool: str, outcome: str, seconds: float) -> None:
        series = self._series.get((method, tool, outcome))
        if series is None:  # the count of (method, tool, outcome), the latency of (method, tool)
            series = (self.count.cell(method, tool, outcome), self.latency.cell(method, tool))
            self._series[(method, tool, outcome)] = series
        count, latency = series
        self.tally(count, latency, self.bounds, seconds)


_REQUESTS: Final = _RequestCollector(_FAST)
REGISTRY.register(_REQUESTS)
