"""Observing MCP requests: a `tether_mcp_requests_total` count, a latency histogram and (while
tracing) a server span per request, parented by the W3C trace context the client sent — the
`traceparent` header, or `_meta.traceparent` as the MCP ecosystem carries it.

Labels stay bounded: a method the router does not serve counts as `other`, a tool the catalog
does not hold as `other`; the task id is a span attribute, never a label.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from tether.jsonrpc import codes
from tether.jsonrpc.errors import JsonRpcError
from tether.jsonrpc.router import RequestContext
from tether.observability import metrics, tracing

OTHER: Final = "other"


def _task_id(ctx: RequestContext, result: dict[str, Any] | None) -> str | None:
    task_id = ctx.params.get("taskId")
    if isinstance(task_id, str):
        return task_id
    created = (result or {}).get("taskId")  # a CreateTaskResult
    return created if isinstance(created, str) else None


def _carrier(ctx: RequestContext) -> tuple[str | None, str | None]:
    meta = ctx.params.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    parent = ctx.headers.get(tracing.TRACEPARENT) or meta.get(tracing.TRACEPARENT)
    state = ctx.headers.get(tracing.TRACESTATE) or meta.get(tracing.TRACESTATE)
    return (
        parent if isinstance(parent, str) else None,
        state if isinstance(state, str) else None,
    )


class RequestObservation:
    """One request: entered around its handling; `result` / `error` end it (once)."""

    __slots__ = ("_began", "_ctx", "_done", "_method", "_span", "_token", "_tool", "_traced")

    def __init__(self, ctx: RequestContext, method: str, tool: str, traced: bool = True) -> None:
        self._ctx = ctx
        self._method = method
        self._tool = tool
        self._traced = traced  # tracing was on when the request began
        self._began = time.perf_counter()
        self._done = False
        self._span: Span | None = None
        self._token: object = None

    def __enter__(self) -> RequestObservation:
        if self._traced and tracing.enabled():
            attributes = {"mcp.method.name": self._ctx.method}
            if self._tool:
                attributes["mcp.tool.name"] = self._tool
            task_id = self._ctx.params.get("taskId")
            if isinstance(task_id, str):  # known now: one attribute fewer to set at the end
                attributes["tether.task_id"] = task_id
            self._span = tracing.start(
                f"mcp {self._ctx.method}" + (f" {self._tool}" if self._tool else ""),
                context=tracing.parent(*_carrier(self._ctx)),
                kind=SpanKind.SERVER,
                attributes=attributes,
            )
            if self._span is not None:
                self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            otel_context.detach(self._token)  # type: ignore[arg-type]  # attach's own token
            self._token = None
        if exc[0] is not None and not self._done:
            self._finish("error", None)

    def result(self, result: dict[str, Any]) -> None:
        outcome = "tool_error" if result.get("isError") is True else "ok"
        if self._span is None and not self._done:  # metrics only (the usual case): inline
            self._done = True
            metrics.request_finished(
                self._method, self._tool, outcome, time.perf_counter() - self._began
            )
            return
        self._finish(outcome, result)

    def error(self, error: JsonRpcError) -> None:
        if self._span is not None:
            self._span.set_attribute("rpc.jsonrpc.error_code", error.code)
        self._finish("error", None)

    def _finish(self, outcome: str, result: dict[str, Any] | None) -> None:
        if self._done:
            return
        self._done = True
        metrics.request_finished(
            self._method, self._tool, outcome, time.perf_counter() - self._began
        )
        if self._span is not None:
            task_id = _task_id(self._ctx, result)
            if task_id is not None and task_id != self._ctx.params.get("taskId"):
                self._span.set_attribute("tether.task_id", task_id)
            tracing.outcome(self._span, outcome, error=outcome != "ok")
            self._span.end()


def observer(
    known_method: Callable[[str], bool], known_tool: Callable[[str], bool]
) -> Callable[[RequestContext], RequestObservation | None]:
    """The endpoint's `observe` hook; None (nothing recorded) while metrics and tracing are
    both off."""

    def observe(ctx: RequestContext) -> RequestObservation | None:
        traced = tracing.enabled()
        if not metrics.enabled and not traced:
            return None
        method = ctx.method if known_method(ctx.method) else OTHER
        tool = ""
        if method == codes.TOOLS_CALL:
            name = ctx.params.get("name")
            tool = name if isinstance(name, str) and known_tool(name) else OTHER
        return RequestObservation(ctx, method, tool, traced)

    return observe
