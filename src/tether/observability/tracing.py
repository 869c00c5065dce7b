"""OpenTelemetry traces: off unless the standard OTEL_* environment asks for an exporter.

`configure()` builds the SDK tracer provider from the environment (OTEL_EXPORTER_OTLP_ENDPOINT,
OTEL_TRACES_EXPORTER, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER … are read by the SDK itself);
`enable(provider)` installs a given provider (tests: an in-memory exporter). While off, every
helper here returns at once and nothing is stored with a run.

The W3C trace context travels as a `traceparent` string: the one a client sent (header or
`_meta`) parents the request span; the request span's is stored with a run it starts, and every
attempt of that run, on whichever worker, is a child of it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACEPARENT: Final = "traceparent"
TRACESTATE: Final = "tracestate"

_propagator: Final = TraceContextTextMapPropagator()
_tracer: trace.Tracer | None = None
_provider: Any = None


def wanted(env: Mapping[str, str]) -> bool:
    """Whether the OTEL_* environment configures a trace exporter."""
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none" or env.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    return bool(exporter or env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip())


def configure(env: Mapping[str, str] | None = None) -> bool:
    """Turn tracing on when the environment asks for it; True when it is on."""
    env = os.environ if env is None else env
    if _tracer is not None or not wanted(env):
        return _tracer is not None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )

    base = Resource.create({"service.name": "tether"})
    provider = TracerProvider(resource=_resource_type()(base.attributes, base.schema_url))
    exporter: SpanExporter
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console":
        exporter = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter,
        )

        exporter = OTLPSpanExporter()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    enable(provider)
    return True


def _resource_type() -> type[Any]:
    """A Resource whose hash is computed once. The OTLP encoder groups every exported span by
    its resource, and the SDK's `Resource.__hash__` serialises the attributes to JSON each time:
    a sixth of the exporter's time under `tasks/get` load (bench/observability.py, py-spy)."""
    from opentelemetry.sdk.resources import Resource

    class HashedResource(Resource):
        def __init__(self, attributes: Any, schema_url: str | None = None) -> None:
            super().__init__(attributes, schema_url)
            self._hash = super().__hash__()

        def __hash__(self) -> int:
            return self._hash

    return HashedResource


def enable(provider: Any) -> None:
    """Trace with `provider` (an SDK TracerProvider) from now on."""
    global _tracer, _provider
    _provider = provider
    _tracer = provider.get_tracer("tether")


def disable() -> None:
    """Stop tracing (flushes what the provider buffered)."""
    global _tracer, _provider
    if _provider is not None:
        _provider.force_flush()
    _tracer = None
    _provider = None


def enabled() -> bool:
    return _tracer is not None


def parent(traceparent: str | None, tracestate: str | None = None) -> Context | None:
    """The context a W3C `traceparent` names; None without one (or with a malformed one)."""
    if not traceparent:
        return None
    carrier = {TRACEPARENT: traceparent}
    if tracestate:
        carrier[TRACESTATE] = tracestate
    ctx = _propagator.extract(carrier)
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def current_traceparent() -> str | None:
    """The `traceparent` of the current span while tracing, else None (nothing to store)."""
    if _tracer is None:
        return None
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get(TRACEPARENT)


def current_trace_id() -> str | None:
    """The current span's trace id in hex (for log lines), or None."""
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None


def start(
    name: str,
    *,
    context: Context | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, Any] | None = None,
) -> Span | None:
    """Start a span (not made current); None while tracing is off."""
    if _tracer is None:
        return None
    return _tracer.start_span(name, context=context, kind=kind, attributes=attributes)


class _Current:
    """`span`'s context manager: the span current around the block and ended after it; an
    exception (an Exception, not a cancellation) marks it an error, as the API's `use_span`
    does. A class rather than a generator: run attempts and steps enter one each."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: Span) -> None:
        self._span = span
        self._token: object = None

    def __enter__(self) -> Span:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return self._span

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        otel_context.detach(self._token)  # type: ignore[arg-type]  # attach's own token
        if isinstance(exc, Exception):
            self._span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        self._span.end()


_OFF: Final = contextlib.nullcontext()


def span(
    name: str,
    *,
    context: Context | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, Any] | None = None,
) -> contextlib.AbstractContextManager[Span | None]:
    """A current span around the block (None while off); an exception marks it an error."""
    started = start(name, context=context, kind=kind, attributes=attributes)
    return _OFF if started is None else _Current(started)


def outcome(target: Span | None, value: str, *, error: bool = False) -> None:
    """Record the outcome attribute (and an error status) on a span, if there is one."""
    if target is None:
        return
    target.set_attribute("tether.outcome", value)
    if error:
        target.set_status(Status(StatusCode.ERROR, value))
