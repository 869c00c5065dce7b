"""While tracing, every attempt is a child of the span its run was started in, however the
worker claimed the run. A settling checkpoint statement's refill claim does not read the
stored traceparent (and would start the run inside the settling attempt's context, parenting
it there), so refills wait while tracing and the claim loop, which reads it, claims."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tether.observability import tracing
from tether.runtime.context import Context
from tether.runtime.registry import App
from tether.runtime.service import running
from tether.runtime.worker import WorkerSettings

pytestmark = pytest.mark.postgres

app = App()


@app.workflow()
async def one_step(ctx: Context, n: int) -> int:
    async def double() -> int:
        return n * 2

    doubled: int = await ctx.step(double)
    return doubled


async def test_every_attempt_continues_its_starters_trace(
    db_url: str, spans: InMemorySpanExporter
) -> None:
    settings = WorkerSettings(concurrency=1, lease_s=5.0, poll_s=0.05, shutdown_grace_s=1.0)
    async with (
        asyncio.timeout(30),
        running(db_url, app, worker_settings=settings, janitor_interval_s=None) as rt,
    ):
        with tracing.span("client") as client:
            assert client is not None
            ids = [(await rt.ops.start("one_step", n)).execution.id for n in range(8)]
        parent = client.get_span_context()
        ends = [await rt.ops.wait_for_end(run_id, timeout=20) for run_id in ids]
    assert [(v.current.status, v.current.output) for v in ends] == [
        ("completed", n * 2) for n in range(8)
    ]
    attempts = [s for s in spans.get_finished_spans() if s.name == "tether.run one_step"]
    assert len(attempts) == 8
    # each a child of the client's span, not of the attempt whose settle claimed it
    assert {(s.context.trace_id, s.parent.span_id if s.parent else None) for s in attempts} == {
        (parent.trace_id, parent.span_id)
    }
