"""The step span (`instrument.step`) and `tracing.span`: current around the block, a child
of what was current, the outcome recorded, an error status on an exception (with the API's
`use_span` description), ended; nothing at all while tracing is off."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tether.observability import instrument, tracing


def test_a_step_span_is_current_inside_its_attempt_and_records_its_outcome(
    spans: InMemorySpanExporter,
) -> None:
    with tracing.span("tether.run wf", attributes={"tether.workflow": "wf"}) as run:
        assert run is not None
        with instrument.step("wf", "fetch"):
            inner = trace.get_current_span()
        assert trace.get_current_span() is run
    assert not trace.get_current_span().get_span_context().is_valid
    step, attempt = spans.get_finished_spans()
    assert step.name == "tether.step fetch"
    assert step.context is not None and inner.get_span_context() == step.context
    assert step.parent == attempt.context
    assert step.attributes == {"tether.step": "fetch", "tether.outcome": "completed"}
    assert step.status.status_code is StatusCode.UNSET


def test_a_failing_step_is_an_error_named_by_its_exception(spans: InMemorySpanExporter) -> None:
    with pytest.raises(ValueError, match="boom"), instrument.step("wf", "fetch"):
        raise ValueError("boom")
    (step,) = spans.get_finished_spans()
    assert step.attributes is not None and step.attributes["tether.outcome"] == "failed"
    assert (step.status.status_code, step.status.description) == (
        StatusCode.ERROR,
        "ValueError: boom",
    )
    assert not trace.get_current_span().get_span_context().is_valid


def test_a_cancelled_step_ends_failed_without_an_exception_description(
    spans: InMemorySpanExporter,
) -> None:
    """A cancellation is no error of the step's (use_span leaves BaseExceptions alone): the
    outcome marks it."""
    with pytest.raises(asyncio.CancelledError), instrument.step("wf", "fetch"):
        raise asyncio.CancelledError
    (step,) = spans.get_finished_spans()
    assert (step.status.status_code, step.status.description) == (StatusCode.ERROR, "failed")


def test_nothing_is_made_while_tracing_is_off() -> None:
    assert not tracing.enabled()
    with tracing.span("x") as span, instrument.step("wf", "fetch"):
        assert span is None
        assert not trace.get_current_span().get_span_context().is_valid
