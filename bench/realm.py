"""Realm's `execute_step` round trip against a `tasks/update` answer, on the same server, in
the same process, on the same runs.

Each of `--concurrency` clients starts one protocol run of `--steps` agent steps in a row and
answers them in turn, alternating the two ways an agent can answer an agent step:

- `execute_step` (Realm's envelope): one call that records the answer and replies once the run
  has stopped at its next agent step, with that step in `next_actions`;
- the ceiling, MCP Tasks: `tasks/update` with the answer under the open wait's key, then
  `tasks/get` until the task asks for the next step (what an agent needs before its next
  answer; the same durable answer path and the same worker underneath).

The figure is the ratio of the two medians (and p90s) measured in the same run; the
target is execute_step / tasks ≤ 1.5 — the envelope must not cost more than the answer.

Usage::

    python -m bench.realm [--dsn URL] [--concurrency 16] [--steps 20]

Without ``--dsn`` an embedded PostgreSQL is started under /tmp and stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import re
import statistics
import time
from typing import Any

import httpx
import orjson
import uvicorn
from bench.dagu_wait import database

from tether.app import create_app
from tether.runtime.registry import App
from tether.settings import Settings

VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
TARGET = 1.5
KEY = re.compile(r"\[key ([^\]]+)\]")


def protocol(steps: int) -> str:
    lines = ["id: bench", "name: Bench", "version: 1", "steps:"]
    for i in range(steps):
        lines += [
            f"  s{i}:",
            f"    description: Step {i}",
            "    execution: agent",
            "    output_schema: {type: object, properties: {n: {type: integer}}, required: [n]}",
        ]
        if i:
            lines.append(f"    depends_on: [s{i - 1}]")
    return "\n".join(lines) + "\n"


class Client:
    """A raw MCP 2026-07-28 client: tools/call, tasks/get, tasks/update."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http, self.url, self.ids = http, url, itertools.count(1)

    async def call(self, method: str, params: dict[str, Any], name: str) -> dict[str, Any]:
        caps: dict[str, Any] = {"extensions": {TASKS: {}}} if method != "tools/call" else {}
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": caps,
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
        }
        body = {"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params}
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": method,
            "Mcp-Name": name,
        }
        resp = await self.http.post(self.url, content=orjson.dumps(body), headers=headers)
        out: dict[str, Any] = resp.json()
        assert "result" in out, out
        result: dict[str, Any] = out["result"]
        return result

    async def tool(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await self.call("tools/call", {"name": name, "arguments": args}, name)
        reply: dict[str, Any] = orjson.loads(result["content"][0]["text"])
        return reply

    async def task(self, run: str) -> dict[str, Any]:
        return await self.call("tasks/get", {"taskId": run}, run)


async def _asks(c: Client, run: str, step: str) -> str:
    """Poll tasks/get until the task waits for agent step `step` (its `statusMessage` names
    the step and the wait's key); that key."""
    while True:
        task = await c.task(run)
        message = task.get("statusMessage") or ""
        found = KEY.search(message)
        if f"agent step '{step}'" in message and found:
            return found.group(1)
        await asyncio.sleep(0.002)


async def one_run(c: Client, steps: int, es: list[float], tu: list[float]) -> None:
    started = await c.tool("start_run", {"workflow_id": "bench"})
    run = started["run_id"]
    key = await _asks(c, run, "s0")
    for i in range(steps):
        t0 = time.perf_counter()
        if i % 2 == 0:
            reply = await c.tool(
                "execute_step", {"run_id": run, "command": f"s{i}", "params": {"n": i}}
            )
            assert reply["status"] == "ok", reply
            if i + 1 < steps:
                cmd = reply["next_actions"][0]["instruction"]["params"]["command"]
                assert cmd == f"s{i + 1}", reply
            es.append(time.perf_counter() - t0)
            key = await _asks(c, run, f"s{i + 1}") if i + 1 < steps else ""
        else:
            answer = {key: {"action": "accept", "content": {"n": i}}}
            await c.call("tasks/update", {"taskId": run, "inputResponses": answer}, run)
            if i + 1 < steps:
                await _asks(c, run, f"s{i + 1}")
            tu.append(time.perf_counter() - t0)


async def measure(dsn: str, concurrency: int, steps: int) -> tuple[list[float], list[float]]:
    app = App("bench-realm")
    app.protocol(protocol(steps))
    conf = Settings.model_validate(
        {"database_url": dsn, "state_key": "bench", "janitor_interval_s": 3600.0}
    )
    server = uvicorn.Server(
        uvicorn.Config(create_app(app, conf, dsn), port=0, log_level="warning", lifespan="on")
    )
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:  # noqa: ASYNC110 — uvicorn exposes a flag, not an event
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}{conf.mcp_path}"
        limits = httpx.Limits(max_connections=concurrency * 2)
        async with httpx.AsyncClient(timeout=60, limits=limits) as http:
            c = Client(http, url)
            await one_run(c, 2, [], [])  # warm-up
            es: list[float] = []
            tu: list[float] = []
            await asyncio.gather(*(one_run(c, steps, es, tu) for _ in range(concurrency)))
            return es, tu
    finally:
        server.should_exit = True
        await serving


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))] * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    with database(args.dsn) as dsn:
        es, tu = asyncio.run(measure(dsn, args.concurrency, args.steps))
    ratio = statistics.median(es) / statistics.median(tu)
    print(
        f"concurrency={args.concurrency} answers: execute_step={len(es)} tasks={len(tu)}\n"
        f"execute_step round trip ms: p50={pct(es, 0.5):.1f} p90={pct(es, 0.9):.1f}\n"
        f"tasks/update + tasks/get to the next ask ms: p50={pct(tu, 0.5):.1f} "
        f"p90={pct(tu, 0.9):.1f}\n"
        f"ratio execute_step/tasks p50={ratio:.2f} p90={pct(es, 0.9) / pct(tu, 0.9):.2f} "
        f"(target ≤ {TARGET})"
    )
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
