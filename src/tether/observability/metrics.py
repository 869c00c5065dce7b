"""Prometheus metrics: definitions and the recording calls the runtime and the app make.

Names follow Prometheus conventions (units in names, `_total` for counters); labels are
bounded: workflow names come from the registry, methods and tools from the catalog (callers
pass `other` for anything else), never a run id. `enabled` switches recording off (the
benchmark's baseline; `TETHER_METRICS=false`).
"""

from __future__ import annotations

import bisect
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Protocol

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

# Step and request latencies: milliseconds to minutes; runs: seconds to days.
_FAST: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_SLOW: Final = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 86400, 7 * 86400)

RUNS_STARTED: Final = Counter(
    "tether_runs_started", "Runs claimed for the first time, by workflow", ["workflow"]
)
RUNS_ENDED: Final = Counter(
    "tether_runs_ended",
    "Runs that reached an end, by workflow and end status",
    ["workflow", "status"],
)
RUN_ATTEMPTS: Final = Counter(
    "tether_run_attempts",
    "Run attempts (one claim each) by workflow and outcome: the status it left the run in "
    "(waiting = parked, pending = retry or timer), lost, or crashed",
    ["workflow", "outcome"],
)
RUN_DURATION: Final = Histogram(
    "tether_run_duration_seconds",
    "From a run's creation to its end",
    ["workflow", "status"],
    buckets=_SLOW,
)
ATTEMPT_DURATION: Final = Histogram(
    "tether_run_attempt_duration_seconds",
    "One claim of a run: replay until it parks or ends",
    ["workflow"],
    buckets=_FAST,
)
STEP_DURATION: Final = Histogram(
    "tether_step_duration_seconds",
    "One execution of a step (replays are not counted)",
    ["workflow", "outcome"],
    buckets=_FAST,
)
LEASE_RECOVERIES: Final = Counter(
    "tether_lease_recoveries",
    "Runs claimed after their previous worker's lease expired (it died or lost the database)",
    ["workflow"],
)
LEASES_LOST: Final = Counter(
    "tether_leases_lost", "Runs this process stopped because it lost their lease", ["workflow"]
)
RUNS_ABANDONED: Final = Counter(
    "tether_runs_abandoned",
    "Poison runs the claim ended failed (TETHER_MAX_RECOVERY_ATTEMPTS lost workers in a row)",
    ["workflow"],
)
SSE_STREAMS: Final = Gauge("tether_sse_streams", "Open SSE response streams")
SUBSCRIPTIONS_DROPPED: Final = Counter(
    "tether_subscriptions_dropped",
    "subscriptions/listen streams the server ended because the client took no frame in time",
    ["reason"],
)
#: What a listen stream follows (the label values of tether_subscription_feeds).
FEED_KINDS: Final = ("task", "resource", "tools_list")

enabled = True


def run_claimed(workflow: str, attempt: int, lost_leases: int) -> None:
    """A worker claimed a run to execute it."""
    if not enabled:
        return
    if attempt == 1:
        RUNS_STARTED.labels(workflow).inc()
    if lost_leases:
        LEASE_RECOVERIES.labels(workflow).inc()


def run_abandoned(workflow: str) -> None:
    if enabled:
        RUNS_ABANDONED.labels(workflow).inc()


def attempt_finished(workflow: str, outcome: str, seconds: float) -> None:
    """One claim ended with `outcome` (the run's new status, `lost` or `crashed`)."""
    if not enabled:
        return
    RUN_ATTEMPTS.labels(workflow, outcome).inc()
    ATTEMPT_DURATION.labels(workflow).observe(seconds)
    if outcome == "lost":
        LEASES_LOST.labels(workflow).inc()


def run_ended(workflow: str, status: str, seconds: float) -> None:
    if enabled:
        RUNS_ENDED.labels(workflow, status).inc()
        RUN_DURATION.labels(workflow, status).observe(seconds)


def step_finished(workflow: str, outcome: str, seconds: float) -> None:
    if enabled:
        STEP_DURATION.labels(workflow, outcome).observe(seconds)


def request_finished(method: str, tool: str, outcome: str, seconds: float) -> None:
    """One MCP request ended (`tether_mcp_requests_total`, its latency histogram)."""
    if enabled:
        _REQUESTS.add(method, tool, outcome, seconds)


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


class _RequestCollector(Collector):
    """`tether_mcp_requests_total` and `tether_mcp_request_duration_seconds`, kept as plain
    numbers and turned into metric families at scrape time. On the `tasks/get` hot path a
    request then costs a dict lookup, a bisect and a few additions under one lock, where
    prometheus_client's labelled children took three locks and a dozen calls (issue 16)."""

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.bounds = buckets
        self.lock = threading.Lock()  # a scrape may run in a thread; recording never waits long
        self.counts: dict[tuple[str, str, str], list[float]] = {}  # → [count, created]
        # (method, tool) → [count per bucket (the last: over every bound)..., sum, created]
        self.latency: dict[tuple[str, str], list[float]] = {}
        self._series: dict[tuple[str, str, str], tuple[list[float], ...]] = {}  # both, by key

    def add(self, method: str, tool: str, outcome: str, seconds: float) -> None:
        series = self._series.get((method, tool, outcome))
        if series is None:
            series = self._new_series(method, tool, outcome)
        count, latency = series
        with self.lock:
            count[0] += 1.0
            latency[bisect.bisect_left(self.bounds, seconds)] += 1.0
            latency[-2] += seconds

    def _new_series(self, method: str, tool: str, outcome: str) -> tuple[list[float], ...]:
        """The count of (method, tool, outcome) and the latency of (method, tool), made once."""
        with self.lock:
            count = self.counts.setdefault((method, tool, outcome), [0.0, time.time()])
            empty = [0.0] * (len(self.bounds) + 2) + [time.time()]
            latency = self.latency.setdefault((method, tool), empty)
            series = self._series[(method, tool, outcome)] = (count, latency)
        return series

    def collect(self) -> Iterator[Metric]:
        with self.lock:
            counts = [(key, list(value)) for key, value in self.counts.items()]
            latency = [(key, list(value)) for key, value in self.latency.items()]
        requests = CounterMetricFamily(
            "tether_mcp_requests",
            "MCP requests by method, tool (tools/call) and outcome",
            labels=["method", "tool", "outcome"],
        )
        for key, (count, created) in counts:
            requests.add_metric(key, count, created=created)
        yield requests
        yield self._histogram(latency)

    def _histogram(self, latency: list[tuple[tuple[str, str], list[float]]]) -> Metric:
        name = "tether_mcp_request_duration_seconds"
        family = HistogramMetricFamily(
            name, "MCP request latency by method and tool", labels=["method", "tool"]
        )
        # prometheus_client's own spelling of a bound ("1.0", "0.0025"), as its Histogram's
        edges = [floatToGoString(b) for b in self.bounds] + ["+Inf"]  # type: ignore[no-untyped-call]
        for (method, tool), values in latency:
            cumulative, total = [], 0.0
            for edge, count in zip(edges, values[: len(edges)], strict=True):
                total += count
                cumulative.append((edge, total))
            family.add_metric([method, tool], cumulative, values[-2])
            family.add_sample(f"{name}_created", {"method": method, "tool": tool}, values[-1])
        return family


_REQUESTS: Final = _RequestCollector(_FAST)
REGISTRY.register(_REQUESTS)
