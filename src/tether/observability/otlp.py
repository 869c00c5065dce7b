"""OTLP/HTTP span export with a direct protobuf encoder.

The SDK's OTLP exporter builds a protobuf message object per span, attribute and value before
serialising them: about 25 µs a span, as much as the span itself costs (docs/benchmarks.md,
"Observability overhead"). `encode` writes the same `ExportTraceServiceRequest` straight to
the wire format from the SDK's ReadableSpan fields, in about a fifth of that;
tests/observability/test_otlp.py holds it equal, message for message, to the SDK encoder's
output for every kind of span field and attribute value.

`Exporter` is the SDK's `OTLPSpanExporter` (endpoint, headers, TLS, compression, timeout and
retries all from the standard OTEL_EXPORTER_OTLP_* environment) with this encoder in place of
the SDK's. It relies on the exporter's internals (its HTTP client and self-metrics); on an
SDK whose exporter lacks them, `exporter()` returns the stock exporter. A batch this encoder
cannot write (a value of a type OTLP has no field for) goes through the SDK's encoder, which
logs and drops what it cannot encode, as before.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping, Sequence
from typing import Any, Final

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import SpanContext, SpanKind

logger = logging.getLogger(__name__)

_DOUBLE: Final = struct.Struct("<d").pack
_FIXED64: Final = struct.Struct("<Q").pack
_FIXED32: Final = struct.Struct("<I").pack
_SMALL: Final = tuple(bytes((n,)) for n in range(128))
_INT64: Final = 1 << 64
# Span.kind: the OTLP enum is the SDK's enum shifted by one (0 is UNSPECIFIED).
_KIND: Final = {kind: _SMALL[kind.value + 1] for kind in SpanKind}
# Span.flags: SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK, and with IS_REMOTE when the parent is.
_LOCAL_PARENT: Final = b"\x85\x01" + _FIXED32(0x100)
_REMOTE_PARENT: Final = b"\x85\x01" + _FIXED32(0x300)
_EMPTY_SCOPE: Final = b"\x0a\x00"


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _ld(tag: bytes, data: bytes) -> bytes:
    """A length-delimited field: `tag` (field number and wire type 2), length, bytes."""
    return tag + _varint(len(data)) + data


def _value(value: Any) -> bytes:
    """An AnyValue message (as the SDK encoder writes it: a oneof, so defaults are written)."""
    if isinstance(value, str):
        return _ld(b"\x0a", value.encode())
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        if not -(1 << 63) <= value < (1 << 63):
            raise OverflowError("an int attribute outside int64")
        return b"\x18" + _varint(value % _INT64)
    if isinstance(value, float):
        return b"\x21" + _DOUBLE(value)
    if value is None:
        return b""
    if isinstance(value, bytes):
        return _ld(b"\x3a", value)
    if isinstance(value, Sequence):
        return _ld(b"\x2a", b"".join(_ld(b"\x0a", _value(v)) for v in value))
    if isinstance(value, Mapping):
        return _ld(b"\x32", _attributes(value, b"\x0a"))
    raise TypeError(f"no OTLP value for {type(value).__name__}")


# Encoded pieces that repeat from span to span, bounded (cleared when full): attribute
# key-values of strings and ints (method, workflow and step names, outcomes; ids churn
# through), a span's name and kind, its status.
_CACHE: dict[tuple[Any, ...], bytes] = {}
_CACHE_SIZE: Final = 4096
_CACHED: Final = frozenset({str, bool, int})


def _remember(key: tuple[Any, ...], encoded: bytes) -> bytes:
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.clear()
    _CACHE[key] = encoded
    return encoded


def _key_value(tag: bytes, key: str, value: Any) -> bytes:
    """A KeyValue message as field `tag` (tag, length, message)."""
    return _ld(tag, _ld(b"\x0a", str(key).encode()) + _ld(b"\x12", _value(value)))


def _attributes(attributes: Mapping[str, Any] | None, tag: bytes) -> bytes:
    """Repeated KeyValue under field `tag`."""
    if not attributes:
        return b""
    parts = []
    for key, value in attributes.items():
        if type(value) in _CACHED:
            cache_key = (tag, key, type(value), value)
            encoded = _CACHE.get(cache_key)
            if encoded is None:
                encoded = _remember(cache_key, _key_value(tag, key, value))
            parts.append(encoded)
        else:
            parts.append(_key_value(tag, key, value))
    return b"".join(parts)


def _count(tag: bytes, n: int) -> bytes:
    return tag + _varint(n) if n else b""


def _flags(parent: SpanContext | None) -> bytes:
    return _REMOTE_PARENT if parent is not None and parent.is_remote else _LOCAL_PARENT


def _named(name: str, kind: SpanKind) -> bytes:
    """Span fields 5 and 6: name and kind."""
    cache_key = ("name", name, kind)
    encoded = _CACHE.get(cache_key)
    if encoded is None:
        named = _ld(b"\x2a", name.encode()) if name else b""
        encoded = _remember(cache_key, named + b"\x30" + _KIND[kind])
    return encoded


def _status(code: int, description: str | None) -> bytes:
    """Span field 15: the status (always written, as the SDK encoder does)."""
    cache_key = ("status", code, description)
    encoded = _CACHE.get(cache_key)
    if encoded is None:
        body = _ld(b"\x12", description.encode()) if description else b""
        encoded = _remember(cache_key, _ld(b"\x7a", body + _count(b"\x18", code)))
    return encoded


def _span(span: ReadableSpan) -> bytes:
    """One Span message, fields in field-number order."""
    ctx = span.context
    assert ctx is not None  # noqa: S101 — an SDK span always has its context
    out = bytearray(b"\x0a\x10")
    out += ctx.trace_id.to_bytes(16, "big")
    out += b"\x12\x08"
    out += ctx.span_id.to_bytes(8, "big")
    if ctx.trace_state:
        out += _ld(b"\x1a", ",".join(f"{k}={v}" for k, v in ctx.trace_state.items()).encode())
    parent = span.parent
    if parent is not None:
        out += b"\x22\x08"
        out += parent.span_id.to_bytes(8, "big")
    out += _named(span.name, span.kind)
    start, end = span.start_time, span.end_time
    if start:
        out += b"\x39"
        out += _FIXED64(start)
    if end:
        out += b"\x41"
        out += _FIXED64(end)
    out += _attributes(span.attributes, b"\x4a")
    if span.dropped_attributes:
        out += _count(b"\x50", span.dropped_attributes)
    _events_and_links(span, out)
    status = span.status
    out += _status(status.status_code.value, status.description)
    out += _flags(parent)
    return bytes(out)


def _events_and_links(span: ReadableSpan, out: bytearray) -> None:
    for event in span.events:
        body = b"\x09" + _FIXED64(event.timestamp) if event.timestamp else b""
        body += _ld(b"\x12", event.name.encode()) if event.name else b""
        body += _attributes(event.attributes, b"\x1a")
        out += _ld(b"\x5a", body + _count(b"\x20", event.dropped_attributes))
    out += _count(b"\x60", span.dropped_events)
    for link in span.links:
        body = b"\x0a\x10" + link.context.trace_id.to_bytes(16, "big")
        body += b"\x12\x08" + link.context.span_id.to_bytes(8, "big")
        body += _attributes(link.attributes, b"\x22")
        body += _count(b"\x28", link.dropped_attributes) + b"\x35" + _flags(link.context)[2:]
        out += _ld(b"\x6a", body)
    out += _count(b"\x70", span.dropped_links)


def encode(spans: Sequence[ReadableSpan]) -> bytes:
    """The ExportTraceServiceRequest for `spans`, grouped by resource and scope as the SDK
    encoder groups them (by identity: the spans of one provider share both objects)."""
    groups: dict[int, tuple[Any, dict[int, tuple[Any, list[bytes]]]]] = {}
    for span in spans:
        resource, scope = span.resource, span.instrumentation_scope
        scopes = groups.setdefault(id(resource), (resource, {}))[1]
        scopes.setdefault(id(scope), (scope, []))[1].append(_ld(b"\x12", _span(span)))
    out = []
    for resource, scopes in groups.values():
        body = [_ld(b"\x0a", _attributes(resource.attributes, b"\x0a"))]
        for scope, encoded in scopes.values():
            head = _EMPTY_SCOPE
            if scope is not None:
                fields = _ld(b"\x0a", scope.name.encode()) if scope.name else b""
                fields += _ld(b"\x12", scope.version.encode()) if scope.version else b""
                head = _ld(b"\x0a", fields + _attributes(scope.attributes, b"\x1a"))
            tail = _ld(b"\x1a", scope.schema_url.encode()) if scope and scope.schema_url else b""
            body.append(_ld(b"\x12", head + b"".join(encoded) + tail))
        if resource.schema_url:
            body.append(_ld(b"\x1a", resource.schema_url.encode()))
        out.append(_ld(b"\x0a", b"".join(body)))
    return b"".join(out)


_INTERNALS: Final = ("_client", "_metrics", "_max_request_size", "_shutdown")


class Exporter(OTLPSpanExporter):
    """The SDK's OTLP/HTTP span exporter, encoding with `encode` (see the module docstring)."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return super().export(spans)
        try:
            data = encode(spans)
        except Exception:  # noqa: BLE001 — anything unexpected: the SDK's encoder, which logs
            return super().export(spans)  # and drops what it cannot write, as it always did
        with self._metrics.export_operation(len(spans)) as result:
            if 0 < self._max_request_size < len(data):
                logger.warning("dropping a span batch of %d bytes: over the size limit", len(data))
                result.error = ValueError("span batch over max_request_size")
                return SpanExportResult.FAILURE
            sent = self._client.export(data)
            if not sent.success:
                result.error = sent.error
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS


def exporter() -> SpanExporter:
    """`Exporter` where the installed SDK's OTLP exporter has the internals it uses, else the
    stock exporter (correct, only slower)."""
    fast = Exporter()
    if all(hasattr(fast, name) for name in _INTERNALS) and hasattr(fast._client, "export"):
        return fast
    logger.info("OTLP span export: the SDK's own encoder (this SDK's exporter differs)")
    fast.shutdown()  # type: ignore[no-untyped-call]  # the SDK leaves it unannotated
    return OTLPSpanExporter()
