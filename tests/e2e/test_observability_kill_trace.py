"""One trace across a kill -9: a `tether serve` process takes a client's call with a
`traceparent`, starts the run, and is SIGKILLed in the middle of the run's second step; the
run's next attempt, on another server, continues the client's trace from the `traceparent`
stored in the run's `created` event.

The killed process exports its spans with the standard OTEL_* environment (the console
exporter, written to its log, batched every 20 ms); the recovering server with the SDK's
in-memory exporter. What a SIGKILL loses is the killed attempt's own span (it never ends);
what survives is the stored trace context, which is what makes the recovered attempt and its
steps children of the client's request."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.apps.traced_kill import app
from tests.conftest import direct_url
from tests.e2e.conftest import ServeFn, free_port, wait_exit
from tests.e2e.test_server_kill import Servers, wait_ready
from tests.mcp_client import McpClient
from tests.waiting import until

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.slow]

APP = "tests/apps/traced_kill.py:app"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"


@pytest.fixture
def servers(db_url: str, tmp_path: Path) -> Iterator[Servers]:
    ss = Servers(db_url, tmp_path, APP)
    try:
        yield ss
    finally:
        ss.kill_all()


def exported(log: str) -> list[dict[str, object]]:
    """The spans the console exporter wrote to a process's log (one JSON object each)."""
    decoder = json.JSONDecoder()
    out, at = [], log.find("{")
    while at != -1:
        try:
            obj, end = decoder.raw_decode(log, at)
        except json.JSONDecodeError:
            at = log.find("{", at + 1)
            continue
        if isinstance(obj, dict) and "context" in obj and "name" in obj:
            out.append(obj)
        at = log.find("{", end)
    return out


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


async def test_a_run_continues_the_clients_trace_after_its_server_is_sigkilled(
    servers: Servers,
    mcp_server: ServeFn,
    spans: InMemorySpanExporter,
    db_url: str,
    tmp_path: Path,
) -> None:
    port, marker = free_port(), tmp_path / "holding"
    env = {
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_BSP_SCHEDULE_DELAY": "20",
        "HOLD_FILE": str(marker),
        "TETHER_LEASE_S": "1",
    }
    first = servers.spawn("server1", "serve", APP, "--port", str(port), **env)
    c = McpClient(await wait_ready(servers, "server1", first, port), timeout=10)
    try:
        created = await c.result(
            "tools/call",
            {"name": "start_held", "arguments": {}},
            headers={"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01"},
        )
    finally:
        await c.aclose()
    task_id = created["taskId"]

    def request_spans() -> list[dict[str, object]]:
        return [
            s for s in exported(servers.log("server1")) if s["name"] == "mcp tools/call start_held"
        ]

    await until(lambda: marker.exists() and request_spans(), timeout=20)  # mid-run: in `hold`
    first.send_signal(signal.SIGKILL)
    assert await wait_exit(first, 10) == -signal.SIGKILL
    (request,) = request_spans()
    context = request["context"]
    assert isinstance(context, dict) and context["trace_id"] == f"0x{TRACE_ID}"
    assert request["parent_id"] == f"0x{CLIENT_SPAN}"
    request_span = str(context["span_id"]).removeprefix("0x")
    conn = await asyncpg.connect(direct_url(db_url))
    try:
        stored = await conn.fetchval(
            "SELECT data->>'traceparent' FROM history WHERE execution_id = $1 AND event_id = 1",
            task_id,
        )
    finally:
        await conn.close()
    assert stored == f"00-{TRACE_ID}-{request_span}-01"

    async with mcp_server(app, lease_s=1.0) as url:  # recovers the run once the lease expires
        c = McpClient(url, timeout=10)
        try:
            done = await c.wait_task(task_id, {"completed", "failed"}, timeout=20)
        finally:
            await c.aclose()
        assert done["status"] == "completed", done
        await until(lambda: bool(named(spans, "tether.run held")), timeout=5)

    (run,) = named(spans, "tether.run held")  # the killed attempt's span died with it
    assert run.context is not None and run.parent is not None and run.attributes is not None
    assert format(run.context.trace_id, "032x") == TRACE_ID
    assert format(run.parent.span_id, "016x") == request_span
    assert run.attributes["tether.task_id"] == task_id and run.attributes["tether.attempt"] == 2
    assert run.attributes["tether.outcome"] == "completed"
    # `first` finished before the kill: replayed, not run again (no span); `hold` ran again.
    assert [s.name for s in spans.get_finished_spans() if s.name.startswith("tether.step")] == [
        "tether.step hold"
    ]
    (step,) = named(spans, "tether.step hold")
    assert step.parent is not None and step.parent.span_id == run.context.span_id
