"""Metrics and traces around a run attempt and its steps (tether.observability does the
recording; this module knows what a run and a step are).

An attempt's span is a child of the trace context stored when the run was created (its
`created` event's `traceparent`, which the worker's claim reads with the row), so every
attempt, on whichever worker, after any restart, joins the trace of the call that started
the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from opentelemetry.trace import Span

from tether.observability import logs, metrics, tracing
from tether.runtime.executor import RunIO, execute
from tether.runtime.registry import App
from tether.runtime.statuses import ENDED_STATUSES
from tether.storage.driver import Database
from tether.storage.rows import ExecutionRow


async def run_attempt(
    pool: Database, app: App, row: ExecutionRow, owner: str, *, io: RunIO, update_timeout: float
) -> str:
    """`executor.execute` inside the attempt's span, log context and metrics."""
    began = time.perf_counter()
    outcome = "crashed"
    token = logs.RUN.set(logs.RunFields(row.id, row.workflow, row.attempt))
    try:
        with _attempt_span(row) as span:
            outcome = await execute(pool, app, row, owner, io=io, update_timeout=update_timeout)
            tracing.outcome(span, outcome, error=outcome in ("failed", "timed_out", "lost"))
        return outcome
    except asyncio.CancelledError:
        outcome = "released"  # shutdown handed the lease back, or the lease went elsewhere
        raise
    finally:
        logs.RUN.reset(token)
        metrics.attempt_finished(row.workflow, outcome, time.perf_counter() - began)
        if outcome in ENDED_STATUSES:
            metrics.run_ended(row.workflow, outcome, row.created_at)


def _attempt_span(row: ExecutionRow) -> contextlib.AbstractContextManager[Span | None]:
    """The attempt's span, a child of the trace context the claim read with the row."""
    if not tracing.enabled():
        return contextlib.nullcontext()
    attributes = {
        "tether.workflow": row.workflow,
        "tether.task_id": row.id,
        "tether.attempt": row.attempt,
        "tether.run_attempt": row.run_attempt,
    }
    return tracing.span(
        f"tether.run {row.workflow}", context=tracing.parent(row.traceparent), attributes=attributes
    )
