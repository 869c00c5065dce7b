"""Instrumentation shared by the runtime's hot paths that cannot import the runtime's
higher modules (a step runs inside the workflow context)."""

from __future__ import annotations

import contextlib
import time
from types import TracebackType

from opentelemetry.trace import Span

from tether.observability import metrics, tracing


class step:  # lower case: used as `with instrument.step(...)`, as the function it replaces
    """Around one execution of a step's function (not its replay): a span and the
    `tether_step_duration_seconds` histogram. A class, not a generator: one per step run."""

    __slots__ = ("_began", "_name", "_scope", "_span", "_workflow")

    def __init__(self, workflow: str, name: str) -> None:
        self._workflow = workflow
        self._name = name
        self._began = 0.0
        self._scope: contextlib.AbstractContextManager[Span | None] | None = None
        self._span: Span | None = None

    def __enter__(self) -> None:
        self._began = time.perf_counter()
        if tracing.enabled():
            name = self._name
            self._scope = tracing.span(f"tether.step {name}", attributes={"tether.step": name})
            self._span = self._scope.__enter__()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        outcome = "completed" if kind is None else "failed"
        if self._scope is not None:
            tracing.outcome(self._span, outcome, error=kind is not None)
            self._scope.__exit__(kind, exc, tb)
        metrics.step_finished(self._workflow, outcome, time.perf_counter() - self._began)
