"""Instrumentation shared by the runtime's hot paths that cannot import the runtime's
higher modules (a step runs inside the workflow context)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from tether.observability import metrics, tracing


@contextlib.contextmanager
def step(workflow: str, name: str) -> Iterator[None]:
    """Around one execution of a step's function (not its replay): a span and the
    `tether_step_duration_seconds` histogram."""
    began = time.perf_counter()
    outcome = "failed"
    with tracing.span(f"tether.step {name}", attributes={"tether.step": name}) as span:
        try:
            yield
            outcome = "completed"
        finally:
            tracing.outcome(span, outcome, error=outcome != "completed")
            metrics.step_finished(workflow, outcome, time.perf_counter() - began)
