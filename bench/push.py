# ruff: noqa: E501, ASYNC110 — a benchmark script: long report lines, client-side busy waits
"""Pushed task notifications against polling, in one run.

A `tether serve` subprocess (its CPU and memory read from /proc) on one PostgreSQL:

1. ``--runs`` runs parked on an approval, followed by listen streams of ``--ids`` task ids
   each, and ``--watchers`` ``sleeper_watch`` calls on runs asleep for an hour;
2. idle: the server's CPU over ``--idle`` seconds with everyone connected (target ≤ 1% of one
   core: nothing polls), and its memory per idle subscriber (RSS before and after);
3. delay: ``--samples`` approvals answered one by one; from sending the answer (its commit
   comes before the reply: an upper bound) to the frame showing the task off input_required, p50/p99 (target ≤ 50 ms);
4. polling, for comparison: the same runs polled with `tasks/get` once a second for
   ``--idle`` seconds — the server's CPU, and the delay a poller sees for the same answers.

Usage: ``python bench/push.py [--dsn URL] [--runs 1000] [--ids 100] [--watchers 200] [--idle 60]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.dags import server
from tests.mcp_client import McpClient, meta
from tests.sse import Stream, listen

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def start(c: McpClient, wf: str) -> str:
    created = await c.result("tools/call", {"name": f"start_{wf}", "arguments": {"body": {}}})
    return str(created["taskId"])


async def approve(c: McpClient, task_id: str) -> None:
    task = await c.wait_task(task_id, {"input_required"}, timeout=60)
    (key,) = task["inputRequests"]
    ok = {"action": "accept", "content": {"decision": "approve"}}
    await c.result("tasks/update", {"taskId": task_id, "inputResponses": {key: ok}})


async def reader(stream: Stream, seen: dict[str, float]) -> None:
    while True:
        m = await stream.next(timeout=3600)
        # The answer's own commit moves the task off input_required: its first frame after.
        if m.get("method") == "notifications/tasks" and m["params"]["status"] != "input_required":
            seen[m["params"]["taskId"]] = time.perf_counter()


async def watcher(c: McpClient, handle: str) -> None:
    params = {"name": "sleeper_watch", "arguments": {"handle": handle, "timeout_seconds": 300},
              "_meta": {**meta(), "progressToken": handle}}  # fmt: skip
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    async with c.http.stream(
        "POST", c.url, content=body, headers=c.headers("tools/call", params)
    ) as r:
        await Stream(r).rest(timeout=3600)


def pct(values: list[float], q: float) -> float:
    return (
        sorted(values)[min(len(values) - 1, int(q * len(values)))] * 1000
        if values
        else float("nan")
    )


async def measure(url: str, pid: int, a: argparse.Namespace) -> dict[str, float]:
    c = McpClient(url, timeout=120)
    c.http = httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=None))
    sem = asyncio.Semaphore(32)

    async def bounded(wf: str) -> str:
        async with sem:
            return await start(c, wf)

    ids = await asyncio.gather(*(bounded("parked") for _ in range(a.runs)))
    sleepers = await asyncio.gather(*(bounded("sleeper") for _ in range(a.watchers)))
    await asyncio.gather(*(c.wait_task(i, {"input_required"}, timeout=120) for i in ids[:5]))
    rss0 = rss_kb(pid)
    seen: dict[str, float] = {}
    tasks: list[asyncio.Task[None]] = []
    streams = []
    for n in range(0, a.runs, a.ids):
        cm = listen(c, {"taskIds": ids[n : n + a.ids]}, request_id=n + 1)
        stream = await cm.__aenter__()
        streams.append(cm)
        tasks.append(asyncio.create_task(reader(stream, seen)))
    tasks += [asyncio.create_task(watcher(c, h)) for h in sleepers]
    await asyncio.sleep(2)  # every stream has its ack and first views
    rss1 = rss_kb(pid)
    cpu0 = cpu_s(pid)
    await asyncio.sleep(a.idle)
    idle_cpu = (cpu_s(pid) - cpu0) / a.idle
    push_delays = []
    for task_id in ids[: a.samples]:
        await c.wait_task(task_id, {"input_required"}, timeout=60)
        t0 = time.perf_counter()
        await approve(c, task_id)
        while task_id not in seen:
            await asyncio.sleep(0.001)
        push_delays.append(seen[task_id] - t0)
    for t in tasks:
        t.cancel()
    for cm in streams:
        await cm.__aexit__(None, None, None)
    print(f"push phase: idle CPU {idle_cpu * 100:.2f}% of a core, delay p50"
          f" {pct(push_delays, 0.5):.1f} ms p99 {pct(push_delays, 0.99):.1f} ms", flush=True)  # fmt: skip
    polled = ids[a.samples : a.samples * 2]
    poll_cpu, poll_delays = await polling(c, pid, ids, polled, a)
    await c.aclose()
    subscribers = a.runs + a.watchers
    return {
        "idle_cpu": idle_cpu, "poll_cpu": poll_cpu,
        "kb_per_subscriber": (rss1 - rss0) / subscribers,
        "push_p50": pct(push_delays, 0.5), "push_p99": pct(push_delays, 0.99),
        "poll_p50": pct(poll_delays, 0.5), "poll_p99": pct(poll_delays, 0.99),
    }  # fmt: skip


async def polling(
    c: McpClient, pid: int, ids: list[str], sampled: list[str], a: argparse.Namespace
) -> tuple[float, list[float]]:
    done: dict[str, float] = {}

    async def poll(client: McpClient, task_id: str) -> None:
        while True:
            task = await client.result("tasks/get", {"taskId": task_id})
            if task["status"] != "input_required":
                done.setdefault(task_id, time.perf_counter())
            await asyncio.sleep(1.0)

    # One HTTP client per 50 pollers: httpx's pool bookkeeping grows with the square of its
    # connections, and one client for 950 pollers measured the client, not the server.
    clients: list[McpClient] = []
    pollers = []
    for n, task_id in enumerate(ids[a.samples :]):
        if n % 50 == 0:
            clients.append(McpClient(c.url, timeout=120))
        pollers.append(asyncio.create_task(poll(clients[-1], task_id)))
    await asyncio.sleep(1.5)
    cpu0 = cpu_s(pid)
    await asyncio.sleep(a.idle)
    cpu = (cpu_s(pid) - cpu0) / a.idle
    delays = []
    for task_id in sampled:
        t0 = time.perf_counter()
        await approve(c, task_id)
        while task_id not in done:
            await asyncio.sleep(0.001)
        delays.append(done[task_id] - t0)
    for p in pollers:
        p.cancel()
    for client in clients:
        await client.aclose()
    return cpu, delays


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dsn")
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--ids", type=int, default=100, help="task ids per listen stream")
    p.add_argument("--watchers", type=int, default=200)
    p.add_argument("--idle", type=float, default=60.0)
    p.add_argument("--samples", type=int, default=50)
    a = p.parse_args()
    with server(a.dsn) as dsn:
        port = free_port()
        env = {**os.environ, "TETHER_DATABASE_URL": dsn, "TETHER_PORT": str(port),
               "TETHER_MAX_SUBSCRIPTIONS": "10000", "TETHER_MAX_SUBSCRIPTION_IDS": str(a.ids),
               "TETHER_POOL_SIZE": "20", "TETHER_WORKERS": "64", "TETHER_STATE_KEY": "bench"}  # fmt: skip
        proc = subprocess.Popen(
            [sys.executable, "-m", "tether", "serve", "bench/push_app.py:app"], env=env
        )
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(600):
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
            m = asyncio.run(measure(f"{url}/mcp", proc.pid, a))
        finally:
            proc.terminate()
            proc.wait(30)
    print(
        f"subscribers: {a.runs} task ids in {-(-a.runs // a.ids)} streams + {a.watchers} watchers"
    )
    print(f"idle server CPU, pushing:  {m['idle_cpu'] * 100:.2f}% of a core (target <= 1%)")
    print(f"idle server CPU, polling:  {m['poll_cpu'] * 100:.2f}% of a core")
    print(f"  push/poll CPU ratio:     {m['idle_cpu'] / max(m['poll_cpu'], 1e-9):.3f}")
    print(f"memory per idle subscriber: {m['kb_per_subscriber']:.1f} KiB")
    print(
        f"delay commit->frame, push: p50 {m['push_p50']:.1f} ms, p99 {m['push_p99']:.1f} ms (target <= 50)"
    )
    poll = f"p50 {m['poll_p50']:.1f} ms, p99 {m['poll_p99']:.1f} ms"
    print(f"delay commit->seen, poll:  {poll}")
    print(f"  push/poll p99 ratio:     {m['push_p99'] / m['poll_p99']:.3f}")


if __name__ == "__main__":
    main()
