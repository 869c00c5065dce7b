"""CPU per `tasks/get` in one process, this tree against another (a before/after of one change).

The whole Tether app (security layer, JSON-RPC endpoint, tasks methods, one row read) is called
as a raw ASGI application, with no HTTP server or client in the measured process, on a run
parked on a signal; the figure is the process's CPU time per request
(`time.process_time`), which a busy machine disturbs far less than throughput or latency.
Each side runs in its own subprocess, on its own database of one embedded PostgreSQL, and
the sides alternate round by round. The other tree is put first on PYTHONPATH, so its
`tether` package is the one imported (it must be importable with this venv's packages).

Usage: ``python bench/tasks_get_cpu.py --before /path/to/old/checkout/src [--rounds 3]``
(make one with ``git worktree add --detach /tmp/old <commit>``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


async def _call(app: Any, method: str, params: dict[str, Any], name: str) -> Any:
    from bench.tasks_get import mcp_request

    headers, body = mcp_request(method, params, name)
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    raw += [(b"host", b"127.0.0.1:8000"), (b"content-length", str(len(body)).encode())]
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"",
        "root_path": "", "headers": raw, "client": ("127.0.0.1", 5555),
        "server": ("127.0.0.1", 8000), "state": {},
    }  # fmt: skip
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop()
        await asyncio.Event().wait()  # the endpoint never reads past the body
        raise AssertionError

    status: list[int] = []
    chunks: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    data = orjson.loads(b"".join(chunks))
    if status != [200] or "result" not in data:
        raise RuntimeError(f"{method}: {status} {data}")
    return data["result"]


async def _measure(dsn: str, requests: int, rounds: int) -> list[float]:
    """µs of this process's CPU per tasks/get, one figure per round."""
    from bench.tasks_get import migrate_db
    from bench.tasks_get_ceilings import tether_app

    await migrate_db(dsn)
    app = tether_app(dsn)
    async with app.router.lifespan_context(app):
        created = await _call(app, "tools/call", {"name": "parked", "arguments": {}}, "parked")
        task_id = created["taskId"]
        for _ in range(200):  # until the run has parked on its signal
            task = await _call(app, "tasks/get", {"taskId": task_id}, task_id)
            if "waiting" in orjson.dumps(task).decode():
                break
            await asyncio.sleep(0.05)
        for _ in range(300):  # warm-up
            await _call(app, "tasks/get", {"taskId": task_id}, task_id)
        figures = []
        for _ in range(rounds):
            began = time.process_time()
            for _ in range(requests):
                await _call(app, "tasks/get", {"taskId": task_id}, task_id)
            figures.append((time.process_time() - began) / requests * 1e6)
    return figures


def _side(dsn: str, src: str, requests: int, rounds: int) -> list[float]:
    env = dict(os.environ, PYTHONPATH=src, TETHER_WORKERS=os.environ.get("BENCH_WORKERS", "1"))
    args = [sys.executable, __file__, "--child", dsn, str(requests), str(rounds)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("CPU_US "):
            return [float(x) for x in line.split()[1:]]
    raise RuntimeError(f"side {src or 'this tree'} failed:\n{done.stderr[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="the other tree's src directory")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the two sides")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        dsn, requests, rounds = args.child
        figures = asyncio.run(_measure(dsn, int(requests), int(rounds)))
        print("CPU_US", *(f"{x:.1f}" for x in figures))
        return
    if not args.before:
        parser.error("--before is required")
    from bench.tasks_get import create_database, embedded_postgres

    sides: dict[str, list[float]] = {"after": [], "before": []}
    with embedded_postgres() as (dsn, _):
        for i in range(args.rounds):
            for name, src in (("after", ""), ("before", args.before)):
                db = asyncio.run(create_database(dsn, f"{name}{i}"))
                sides[name] += _side(db, src, args.requests, 3)
                print(f"round {i + 1} {name}: {sides[name][-3:]}", flush=True)
    after, before = (statistics.median(sides[k]) for k in ("after", "before"))
    count = len(sides["after"])
    print(f"CPU per tasks/get, median of {count}: before {before:.0f} µs, after {after:.0f} µs;")
    print(f"after / before = {after / before:.2f} (target ≤ 1.0: tasks/get must not slow down)")


if __name__ == "__main__":
    main()
