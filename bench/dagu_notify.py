"""`dagu://runs/…` subscription latency: from a DAG run's change to the
`notifications/resources/updated` frame, against raw NOTIFY → LISTEN in the same run.

Each sample starts a three-step DAG (hold → approval gate → work) with `dagu_execute`, opens a
`subscriptions/listen` stream with its run URI in `resourceSubscriptions`, releases `hold`,
and times two frames over HTTP on loopback: the waiting checkpoint (the gate opens) and, after
an approve, the terminal state. A latency is frame-received minus the row's `updated_at` (the
start of the transaction that made the change; PostgreSQL's clock on this host).

The ceiling is the same measure for a bare `pg_notify` carrying its transaction's `now()` to
an asyncpg LISTEN connection: the floor any LISTEN/NOTIFY push pays. Dagu polls every 2 s.

Target: p99 ≤ 100 ms.

Usage::

    python bench/dagu_notify.py [--dsn URL] [--runs 30]

Without ``--dsn`` an embedded PostgreSQL is started under /tmp and stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import asyncpg
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.dagu_wait import database
from tests.mcp_client import McpClient
from tests.sse import Stream, listen

from tether.app import create_app
from tether.runtime.registry import App
from tether.settings import Settings

DAG = """
name: bench
steps:
  - name: hold
    run: hold
  - name: gate
    run: work
    depends: hold
    approval: {prompt: go}
  - name: after
    run: work
    depends: gate
"""
PLAIN: dict[str, object] = {}
RELEASE = asyncio.Event()
UPDATED_AT = """
SELECT extract(epoch FROM updated_at) FROM executions
WHERE workflow = 'bench' AND business_id = $1 ORDER BY created_at DESC LIMIT 1
"""


def build_app() -> App:
    app = App()

    @app.function("hold")
    async def hold() -> str:
        await RELEASE.wait()
        return "released"

    @app.function("work")
    async def work() -> str:
        return "done"

    app.dag(DAG)
    return app


async def execute(c: McpClient, **arguments: object) -> dict[str, object]:
    params = {"name": "dagu_execute", "arguments": arguments}
    result = await c.result("tools/call", params, capabilities=PLAIN)
    assert result["isError"] is False, result
    out: dict[str, object] = result["structuredContent"]
    return out


async def frame_lag(stream: Stream, db: asyncpg.Connection, run_id: str) -> float:
    """Wait for the next resources/updated frame; ms from the row's change to its receipt."""
    message = await stream.next(timeout=30)
    received = time.time()
    assert message.get("method") == "notifications/resources/updated", message
    changed = float(await db.fetchval(UPDATED_AT, run_id))
    return (received - changed) * 1000


async def sample(c: McpClient, db: asyncpg.Connection, i: int) -> tuple[float, float]:
    run_id = f"n-{i}"
    started = await execute(c, action="start", name="bench", dagRunId=run_id)
    async with listen(c, {"resourceSubscriptions": [started["runUri"]]}) as stream:
        await stream.next()  # the ack: the stream follows the run from here
        RELEASE.set()
        checkpoint = await frame_lag(stream, db, run_id)
        RELEASE.clear()
        await execute(c, action="approve", name="bench", dagRunId=run_id, stepName="gate")
        terminal = await frame_lag(stream, db, run_id)
    return checkpoint, terminal


async def ceiling(dsn: str, runs: int) -> list[float]:
    """Raw NOTIFY → LISTEN: a one-statement transaction's now() to the listener's receipt."""
    lags: list[float] = []
    got = asyncio.Event()

    def on(_conn: object, _pid: int, _channel: str, payload: str) -> None:
        lags.append((time.time() - float(payload)) * 1000)
        got.set()

    listener, sender = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    try:
        await listener.add_listener("bench_ceiling", on)
        for _ in range(runs + 1):
            got.clear()
            await sender.execute(
                "SELECT pg_notify('bench_ceiling', extract(epoch FROM now())::text)"
            )
            await asyncio.wait_for(got.wait(), 10)
        return lags[1:]  # the first is a warm-up
    finally:
        await listener.close()
        await sender.close()


async def measure(dsn: str, runs: int) -> tuple[list[float], list[float], list[float]]:
    conf = Settings.model_validate(
        {"database_url": dsn, "state_key": "bench", "janitor_interval_s": 3600.0}
    )
    server = uvicorn.Server(
        uvicorn.Config(create_app(build_app(), conf, dsn), port=0, log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    db = await asyncpg.connect(dsn)
    c: McpClient | None = None
    try:
        while not server.started:  # noqa: ASYNC110 — uvicorn exposes a flag, not an event
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        c = McpClient(f"http://127.0.0.1:{port}{conf.mcp_path}", timeout=60)
        await sample(c, db, 0)  # warm-up
        pairs = [await sample(c, db, i + 1) for i in range(runs)]
        floor = await ceiling(dsn, runs)
        return [p[0] for p in pairs], [p[1] for p in pairs], floor
    finally:
        if c is not None:
            await c.aclose()
        await db.close()
        server.should_exit = True
        await task


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def line(label: str, values: list[float], floor: float) -> str:
    top = p99(values)
    return (
        f"{label:<22} p50={statistics.median(values):6.1f} p99={top:6.1f} "
        f"max={max(values):6.1f}  p99/ceiling={top / floor:5.1f}x"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args(argv)
    with database(args.dsn) as dsn:
        checkpoint, terminal, floor = asyncio.run(measure(dsn, args.runs))
    top = max(p99(floor), 0.001)
    print(f"runs={args.runs}; ms from the run's change to the frame received")
    print(line("ceiling NOTIFY→LISTEN", floor, top))
    print(line("checkpoint → updated", checkpoint, top))
    print(line("terminal → updated", terminal, top))
    worst = max(p99(checkpoint), p99(terminal))
    print(f"target p99 ≤ 100 ms: {'met' if worst <= 100 else 'MISSED'} (Dagu polls every 2000)")
    return 0 if worst <= 100 else 1


if __name__ == "__main__":
    raise SystemExit(main())
