"""JSON log lines: the run's workflow and attempt on every line, its id only at DEBUG (a task
id is a bearer-grade secret), the trace id while a span is current; the audit stream apart."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider

from tether.observability import logs, tracing


def record(level: int, message: str = "hello") -> logging.LogRecord:
    return logging.LogRecord("tether.test", level, __file__, 1, message, None, None)


@pytest.fixture
def in_run() -> Iterator[None]:
    token = logs.RUN.set(logs.RunFields("ex_secret", "review", 3))
    try:
        yield
    finally:
        logs.RUN.reset(token)


def test_a_json_line_names_the_run_but_not_its_id_at_info(in_run: None) -> None:
    """Task ids never at info level (they are bearer-grade secrets)."""
    line = orjson.loads(logs.JsonFormatter().format(record(logging.INFO)))
    assert line["message"] == "hello" and line["level"] == "INFO"
    assert (line["workflow"], line["attempt"]) == ("review", 3)
    assert "run_id" not in line and "ex_secret" not in str(line)
    debug = orjson.loads(logs.JsonFormatter().format(record(logging.DEBUG)))
    assert debug["run_id"] == "ex_secret"


def test_a_json_line_carries_the_current_trace_id() -> None:
    """Our choice: log lines join their trace by `trace_id`."""
    tracing.enable(TracerProvider())
    try:
        with tracing.span("work") as span:
            assert span is not None
            line = orjson.loads(logs.JsonFormatter().format(record(logging.WARNING)))
            assert line["trace_id"] == format(span.get_span_context().trace_id, "032x")
    finally:
        tracing.disable()
    assert "trace_id" not in orjson.loads(logs.JsonFormatter().format(record(logging.WARNING)))


def test_the_audit_stream_goes_to_its_own_file(tmp_path: Path) -> None:
    """TETHER_AUDIT_LOG: audit lines land in that file, not with the rest."""
    audit = logging.getLogger(logs.AUDIT_LOGGER)
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, list(audit.handlers), audit.propagate)
    formatters = [(h, h.formatter) for h in root.handlers]  # configure() restyles them
    try:
        logs.configure("INFO", "json", tmp_path / "audit.log")
        audit.info("tools/call by %s", "ci-bot")
        for handler in audit.handlers:
            handler.flush()
        (line,) = (tmp_path / "audit.log").read_text("utf-8").splitlines()
        assert orjson.loads(line)["message"] == "tools/call by ci-bot"
        assert audit.propagate is False
    finally:
        for handler in audit.handlers:
            handler.close()
        root.handlers[:], audit.handlers[:] = saved[0], saved[2]
        root.setLevel(saved[1])
        audit.propagate = saved[3]
        for handler, fmt in formatters:
            handler.setFormatter(fmt)


def test_tracing_is_off_unless_the_environment_configures_an_exporter() -> None:
    """The standard OTEL_* variables decide; `none` keeps it off."""
    assert not tracing.wanted({})
    assert tracing.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert tracing.wanted({"OTEL_TRACES_EXPORTER": "console"})
    assert not tracing.wanted({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"})
    assert tracing.parent("not-a-traceparent") is None
