"""Prometheus metrics: definitions and the recording calls the runtime and the app make.

Names follow Prometheus conventions (units in names, `_total` for counters); labels are
bounded: workflow names come from the registry, methods and tools from the catalog (callers
pass `other` for anything else), never a run id. `enabled` switches recording off (the
benchmark's baseline; `TETHER_METRICS=false`).
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Gauge, Histogram

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
REQUESTS: Final = Counter(
    "tether_mcp_requests",
    "MCP requests by method, tool (tools/call) and outcome",
    ["method", "tool", "outcome"],
)
REQUEST_DURATION: Final = Histogram(
    "tether_mcp_request_duration_seconds",
    "MCP request latency by method and tool",
    ["method", "tool"],
    buckets=_FAST,
)
SSE_STREAMS: Final = Gauge("tether_sse_streams", "Open SSE response streams")

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
    if enabled:
        REQUESTS.labels(method, tool, outcome).inc()
        REQUEST_DURATION.labels(method, tool).observe(seconds)


def stream_changed(delta: int) -> None:
    """An SSE response stream opened (+1) or closed (-1)."""
    SSE_STREAMS.inc(delta)
