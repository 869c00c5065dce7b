"""The run, attempt and step metrics, kept as plain numbers (observability/series.py), expose
exactly what prometheus_client's own Counter and Histogram, as they were defined before,
expose for the same events: help, type, names, labels, buckets, one `_created` per series."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from tether.observability import metrics

FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
SLOW = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 86400, 7 * 86400)
RUN_AGE_S = 2.0  # the ended run's age: within one bucket of SLOW whatever the test's pace


def _reference(registry: CollectorRegistry) -> dict[str, Counter | Histogram]:
    """The metrics as prometheus_client objects, as they were defined before they became plain
    numbers."""
    wf, wf_status, wf_outcome = ["workflow"], ["workflow", "status"], ["workflow", "outcome"]
    return {
        "started": Counter(
            "tether_runs_started",
            "Runs claimed for the first time, by workflow",
            wf,
            registry=registry,
        ),
        "ended": Counter(
            "tether_runs_ended",
            "Runs that reached an end, by workflow and end status",
            wf_status,
            registry=registry,
        ),
        "attempts": Counter(
            "tether_run_attempts",
            "Run attempts (one claim each) by workflow and outcome: the status it left the run "
            "in (waiting = parked, pending = retry or timer), lost, or crashed",
            wf_outcome,
            registry=registry,
        ),
        "run_s": Histogram(
            "tether_run_duration_seconds",
            "From a run's creation to its end",
            wf_status,
            buckets=SLOW,
            registry=registry,
        ),
        "attempt_s": Histogram(
            "tether_run_attempt_duration_seconds",
            "One claim of a run: replay until it parks or ends",
            wf,
            buckets=FAST,
            registry=registry,
        ),
        "step_s": Histogram(
            "tether_step_duration_seconds",
            "One execution of a step (replays are not counted)",
            wf_outcome,
            buckets=FAST,
            registry=registry,
        ),
        "recoveries": Counter(
            "tether_lease_recoveries",
            "Runs claimed after their previous worker's lease expired (it died or lost the "
            "database)",
            wf,
            registry=registry,
        ),
        "lost": Counter(
            "tether_leases_lost",
            "Runs this process stopped because it lost their lease",
            wf,
            registry=registry,
        ),
        "abandoned": Counter(
            "tether_runs_abandoned",
            "Poison runs the claim ended failed (TETHER_MAX_RECOVERY_ATTEMPTS lost workers in a "
            "row)",
            wf,
            registry=registry,
        ),
    }


STEPS = [("completed", 0.0004), ("completed", 0.001), ("failed", 0.02), ("completed", 120.0)]
ATTEMPTS = [("waiting", 0.3), ("completed", 0.01), ("lost", 61.0), ("completed", 0.0025)]


def _record_theirs(ref: dict[str, Counter | Histogram], wf: str) -> None:
    ref["started"].labels(wf).inc()  # type: ignore[union-attr]
    ref["recoveries"].labels(wf).inc()  # type: ignore[union-attr]
    for outcome, seconds in STEPS:
        ref["step_s"].labels(wf, outcome).observe(seconds)  # type: ignore[union-attr]
    for outcome, seconds in ATTEMPTS:
        ref["attempts"].labels(wf, outcome).inc()  # type: ignore[union-attr]
        ref["attempt_s"].labels(wf).observe(seconds)  # type: ignore[union-attr]
        if outcome == "lost":
            ref["lost"].labels(wf).inc()  # type: ignore[union-attr]
    ref["ended"].labels(wf, "completed").inc()  # type: ignore[union-attr]
    ref["run_s"].labels(wf, "completed").observe(RUN_AGE_S)  # type: ignore[union-attr]
    ref["abandoned"].labels(wf).inc()  # type: ignore[union-attr]


def _record_mine(wf: str) -> None:
    metrics.run_claimed(wf, 1, 0)
    metrics.run_claimed(wf, 2, 1)  # a recovery: not a start
    for outcome, seconds in STEPS:
        metrics.step_finished(wf, outcome, seconds)
    for outcome, seconds in ATTEMPTS:
        metrics.attempt_finished(wf, outcome, seconds)
    created = datetime.fromtimestamp(time.time() - RUN_AGE_S, UTC)
    metrics.run_ended(wf, "completed", created)
    metrics.run_abandoned(wf)


def _lines(registry: CollectorRegistry, wf: str) -> list[str]:
    """HELP, TYPE and `wf`'s samples; the run's duration sum rounded (it took a moment)."""
    out = []
    for line in generate_latest(registry).decode().splitlines():
        if not line.startswith("#") and f'workflow="{wf}"' not in line:
            continue  # other tests' workflows (the process's registry is shared)
        name, (head, value) = line.split("{")[0], line.rsplit(" ", 1)
        if name.endswith("_created") and float(value) > 1e9:
            line = f"{head} (a creation time)"  # creation times differ by nature
        elif name == "tether_run_duration_seconds_sum":
            line = f"{head} {round(float(value)):.1f}"
        out.append(line)
    return out


def test_the_run_metrics_expose_what_prometheus_client_would() -> None:
    wf = f"wf-{uuid.uuid4().hex[:8]}"
    theirs = CollectorRegistry()
    _record_theirs(_reference(theirs), wf)
    mine = CollectorRegistry()
    mine.register(metrics._RUNS)
    _record_mine(wf)
    expected = _lines(theirs, wf)
    assert _lines(mine, wf) == expected
    created = [line for line in expected if line.endswith("(a creation time)")]
    # one per labelled series, as prometheus_client's: 3 attempt outcomes, 2 step outcomes
    assert len(created) == 1 + 1 + 3 + 1 + 1 + 2 + 1 + 1 + 1


def test_nothing_is_recorded_while_disabled() -> None:
    wf = f"wf-{uuid.uuid4().hex[:8]}"
    registry = CollectorRegistry()
    registry.register(metrics._RUNS)
    metrics.enabled = False
    try:
        _record_mine(wf)
    finally:
        metrics.enabled = True
    assert [line for line in _lines(registry, wf) if not line.startswith("#")] == []


def test_a_series_refuses_the_wrong_number_of_label_values() -> None:
    with pytest.raises(ValueError, match="takes labels"):
        metrics.STEP_DURATION.cell("only-a-workflow")
