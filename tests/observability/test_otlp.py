"""Tether's OTLP span encoder writes what the SDK's encoder writes: every span field, every
kind of attribute value, events, links, status, remote and local parents, several resources
and scopes; and its exporter posts that to a real OTLP/HTTP receiver on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

from tether.observability import otlp

REMOTE = SpanContext(
    0x4BF92F3577B34DA6A3CE929D0E0E4736,
    0x00F067AA0BA902B7,
    is_remote=True,
    trace_flags=TraceFlags(TraceFlags.SAMPLED),
    trace_state=TraceState([("vendor", "a1"), ("other", "b2")]),
)
VALUES: dict[str, Any] = {
    "text": "tasks/get",
    "empty": "",
    "unicode": "répété ✓",
    "yes": True,
    "no": False,
    "zero": 0,
    "small": 7,
    "negative": -3,
    "int64_max": (1 << 63) - 1,
    "int64_min": -(1 << 63),
    "float": 1.5,
    "float_zero": 0.0,
    "bytes": b"\x00\xff",
    "strings": ("a", "b"),
    "ints": [1, 2, 300],
    "mixed": (True, 2.5, "x"),
    "empty_seq": (),
    "mapping": {"k": "v", "n": 1},
}


def _provider(resource: Resource, exporter: InMemorySpanExporter, **kw: Any) -> TracerProvider:
    provider = TracerProvider(resource=resource, **kw)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def _spans() -> list[ReadableSpan]:
    """Spans of every shape, from two providers (resources) and three tracers (scopes)."""
    exporter = InMemorySpanExporter()
    first = _provider(Resource.create({"service.name": "tether"}), exporter)
    second = _provider(
        Resource({"service.name": "other", "n": 2}, "https://schema/1"),
        exporter,
        span_limits=SpanLimits(max_span_attributes=2, max_events=1, max_links=1),
    )
    plain = first.get_tracer("tether")
    versioned = first.get_tracer("lib", "1.2", "https://schema/2", {"scope.attr": "s"})
    limited = second.get_tracer("limited")

    root = plain.start_span("mcp tasks/get", kind=SpanKind.SERVER, attributes=VALUES)
    root.set_attribute("tether.outcome", "ok")
    root.set_status(Status(StatusCode.OK))
    child = versioned.start_span("tether.step s", context=trace.set_span_in_context(root))
    child.add_event("retry", {"attempt": 2})
    child.add_event("bare")
    child.set_status(Status(StatusCode.ERROR, "failed"))
    child.end()
    root.end()
    linked = plain.start_span(
        "remote child",
        context=trace.set_span_in_context(trace.NonRecordingSpan(REMOTE)),
        kind=SpanKind.CONSUMER,
        links=[Link(REMOTE, {"why": "batch"}), Link(root.get_span_context())],
    )
    linked.end()
    over = limited.start_span("", attributes={"a": 1, "b": 2, "c": 3}, kind=SpanKind.CLIENT)
    over.add_event("one")
    over.add_event("two")
    over.add_link(REMOTE)
    over.add_link(root.get_span_context())
    over.end()
    return list(exporter.get_finished_spans())


def test_the_encoding_equals_the_sdk_encoders_message_for_message() -> None:
    spans = _spans()
    assert ExportTraceServiceRequest.FromString(otlp.encode(spans)) == encode_spans(spans)
    # and one span at a time, in each order of resources
    for span in spans:
        assert ExportTraceServiceRequest.FromString(otlp.encode([span])) == encode_spans([span])
    assert ExportTraceServiceRequest.FromString(otlp.encode(spans[::-1])) == encode_spans(
        spans[::-1]
    )
    assert otlp.encode([]) == encode_spans([]).SerializePartialToString() == b""


def test_the_comparison_catches_a_wrong_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """The equality above is not vacuous: a wrong flags field (is_remote set on local parents)
    makes it fail."""
    monkeypatch.setattr(otlp, "_LOCAL_PARENT", otlp._REMOTE_PARENT)
    spans = _spans()
    assert ExportTraceServiceRequest.FromString(otlp.encode(spans)) != encode_spans(spans)


def test_a_value_otlp_cannot_hold_is_refused_by_name() -> None:
    """An int outside int64 raises (the exporter then hands the batch to the SDK's encoder)."""
    exporter = InMemorySpanExporter()
    tracer = _provider(Resource.create({}), exporter).get_tracer("t")
    tracer.start_span("big", attributes={"n": 1 << 64}).end()
    with pytest.raises(OverflowError, match="int64"):
        otlp.encode(exporter.get_finished_spans())


class Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver: keeps each body; answers `status`."""

    bodies: ClassVar[list[bytes]] = []
    status: ClassVar[int] = 200

    def do_POST(self) -> None:
        Receiver.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(Receiver.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args: Any) -> None:
        return


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[Receiver]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Receiver.bodies, Receiver.status = [], 200
    endpoint = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
    try:
        yield Receiver
    finally:
        server.shutdown()
        server.server_close()


def test_the_exporter_posts_the_encoding_to_the_configured_endpoint(
    receiver: type[Receiver],
) -> None:
    exporter = otlp.exporter()
    assert isinstance(exporter, otlp.Exporter)  # this SDK has what the fast path needs
    spans = _spans()
    try:
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        receiver.status = 400
        assert exporter.export(spans[:1]) is SpanExportResult.FAILURE
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]  # the SDK leaves it unannotated
    assert [ExportTraceServiceRequest.FromString(b) for b in receiver.bodies] == [
        encode_spans(spans),
        encode_spans(spans[:1]),
    ]


def test_a_batch_the_encoder_refuses_goes_through_the_sdk_encoder(
    receiver: type[Receiver],
) -> None:
    """The SDK's encoder logs and drops the attribute it cannot write; the span still goes."""
    memory = InMemorySpanExporter()
    tracer = _provider(Resource.create({}), memory).get_tracer("t")
    tracer.start_span("big", attributes={"n": 1 << 64, "ok": 1}).end()
    exporter = otlp.exporter()
    try:
        assert exporter.export(memory.get_finished_spans()) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    (body,) = receiver.bodies
    (span,) = ExportTraceServiceRequest.FromString(body).resource_spans[0].scope_spans[0].spans
    assert [a.key for a in span.attributes] == ["ok"]
