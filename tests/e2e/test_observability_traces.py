"""One trace from a client's `traceparent` through a server restart to the run's end: the
MCP request span continues the client's trace, every run attempt (on whichever server) is a
child of that request span, and each step a child of its attempt. The SDK's in-memory
exporter collects the spans. This is the graceful handover; test_observability_kill_trace.py
SIGKILLs the server mid-run."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.e2e.conftest import ServeFn
from tests.mcp_client import McpClient, meta
from tether import Context
from tether.observability import tracing
from tether.runtime.exposure import Exposure
from tether.runtime.registry import App

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"

app = App("traced")


def double(value: int) -> int:
    return value * 2


@app.workflow(expose=Exposure(tool_set=True))
async def traced(ctx: Context) -> int:
    first = int(await ctx.step(double, 1, name="first"))
    await ctx.wait_for_signal("go")
    return int(await ctx.step(double, first, name="second"))


class Notifying(SimpleSpanProcessor):
    """Exports each ended span at once and wakes whoever waits for one (spans end on the
    event loop's thread: the run tasks and request handlers)."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        super().__init__(exporter)
        self.ended = asyncio.Event()

    def on_end(self, span: ReadableSpan) -> None:
        super().on_end(span)
        self.ended.set()


PROCESSOR: list[Notifying] = []


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    processor = Notifying(exporter)
    provider.add_span_processor(processor)
    PROCESSOR[:] = [processor]
    tracing.enable(provider)
    try:
        yield exporter
    finally:
        tracing.disable()


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


async def until(check: Callable[[], bool]) -> None:
    """Wait (bounded) until `check` holds, re-checking as spans end."""
    (processor,) = PROCESSOR
    async with asyncio.timeout(10):
        while True:
            processor.ended.clear()
            if check():
                return
            await processor.ended.wait()


@pytest.mark.parametrize("carrier", ["header", "meta"])
async def test_one_trace_from_the_client_through_a_restart_to_the_end(
    mcp_server: ServeFn,
    client: Callable[[str], McpClient],
    spans: InMemorySpanExporter,
    carrier: str,
) -> None:
    """The client's trace id on the request, both attempts and both steps."""
    traceparent = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"
    params: dict[str, object] = {"name": "start_traced", "arguments": {}}
    headers: dict[str, str | None] = {}
    if carrier == "header":
        headers["traceparent"] = traceparent
    async with mcp_server(app) as url:
        c = client(url)
        if carrier == "meta":
            params["_meta"] = {**meta(), "traceparent": traceparent}
        created = await c.result("tools/call", params, headers=headers)
        task_id = created["taskId"]
        await until(lambda: bool(named(spans, "tether.run traced")))  # parked on its signal
    async with mcp_server(app) as url:  # another server: the worker that finishes the run
        c = client(url)
        await c.result(
            "tools/call", {"name": "signal_traced", "arguments": {"handle": task_id, "name": "go"}}
        )
        await c.wait_task(task_id, {"completed"})
        await until(lambda: len(named(spans, "tether.run traced")) == 2)

    (request,) = named(spans, "mcp tools/call start_traced")
    assert request.context is not None and request.parent is not None
    assert format(request.context.trace_id, "032x") == TRACE_ID
    assert format(request.parent.span_id, "016x") == CLIENT_SPAN
    assert request.attributes is not None and request.attributes["tether.task_id"] == task_id
    polls = named(spans, "mcp tasks/get")  # the task id known from the params, set at start
    assert polls and all(p.attributes and p.attributes["tether.task_id"] == task_id for p in polls)
    assert all(p.attributes and p.attributes["tether.outcome"] == "ok" for p in polls)
    runs = named(spans, "tether.run traced")
    assert [r.attributes["tether.outcome"] for r in runs if r.attributes] == [
        "waiting",
        "completed",
    ]
    for run in runs:
        assert run.context is not None and run.parent is not None
        assert format(run.context.trace_id, "032x") == TRACE_ID
        assert run.parent.span_id == request.context.span_id
    steps = {s.name: s for s in named(spans, "tether.step")}
    assert set(steps) == {"tether.step first", "tether.step second"}
    for step, run in zip(
        (steps["tether.step first"], steps["tether.step second"]), runs, strict=True
    ):
        assert step.parent is not None and run.context is not None
        assert step.parent.span_id == run.context.span_id
