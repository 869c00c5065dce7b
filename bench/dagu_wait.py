"""`dagu_execute` wait latency: the time from a DAG run's end to the `wait` reply, over HTTP.

Each sample starts a one-step DAG (a Python action that sleeps `--work-ms`) with
`{"action": "start", "wait": true}` against a real Tether server on loopback, and measures
reply-received minus the run's recorded end (`finishedAt`, PostgreSQL's clock on this host).
The reply is pushed by LISTEN/NOTIFY (`Operations.wait_until`); Dagu polls every 2 s.

Target: p99 ≤ 100 ms.

Usage::

    python bench/dagu_wait.py [--dsn URL] [--runs 30] [--work-ms 50]

Without ``--dsn`` an embedded PostgreSQL is started under /tmp and stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import uvicorn

from tether.app import create_app
from tether.runtime.registry import App
from tether.settings import Settings
from tether.storage import embedded

DAG = """
name: bench
steps:
  - name: work
    run: work
"""
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "dagu_execute",
}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
}


def build_app(work_ms: int) -> App:
    app = App()

    @app.function("work")
    async def work() -> str:
        await asyncio.sleep(work_ms / 1000)
        return "done"

    app.dag(DAG)
    return app


async def sample(http: httpx.AsyncClient, url: str, i: int) -> float:
    body = {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {
            "name": "dagu_execute",
            "arguments": {"action": "start", "name": "bench", "wait": True},
            "_meta": META,
        },
    }
    resp = await http.post(url, json=body, headers=HEADERS)
    received = time.time()
    out = resp.json()["result"]["structuredContent"]
    assert out["completed"] is True, out
    ended = datetime.fromisoformat(out["run"]["finishedAt"]).timestamp()
    return (received - ended) * 1000


async def measure(dsn: str, runs: int, work_ms: int) -> list[float]:
    conf = Settings.model_validate(
        {"database_url": dsn, "state_key": "bench", "janitor_interval_s": 3600.0}
    )
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(build_app(work_ms), conf, dsn), port=0, log_level="warning", lifespan="on"
        )
    )
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:  # noqa: ASYNC110 — uvicorn exposes a flag, not an event
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}{conf.mcp_path}"
        async with httpx.AsyncClient(timeout=60) as http:
            await sample(http, url, 0)  # warm-up
            return [await sample(http, url, i + 1) for i in range(runs)]
    finally:
        server.should_exit = True
        await task


@contextlib.contextmanager
def database(dsn: str | None) -> Iterator[str]:
    if dsn:
        yield dsn
        return
    folder = Path(tempfile.mkdtemp(prefix="tdw", dir="/tmp"))
    os.chmod(folder, 0o755)  # noqa: S103 — as root, pgserver runs PostgreSQL as another user
    srv = embedded.start(folder)
    try:
        yield srv.uri
    finally:
        srv.stop()
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--work-ms", type=int, default=50)
    args = parser.parse_args(argv)
    with database(args.dsn) as dsn:
        lat = sorted(asyncio.run(measure(dsn, args.runs, args.work_ms)))
    p99 = lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))]
    print(
        f"runs={len(lat)} end→wait reply ms: p50={statistics.median(lat):.1f} "
        f"p99={p99:.1f} max={lat[-1]:.1f} (target p99 ≤ 100; Dagu polls every 2000)"
    )
    return 0 if p99 <= 100 else 1


if __name__ == "__main__":
    raise SystemExit(main())
