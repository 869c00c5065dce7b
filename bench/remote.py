"""Remote calls: what a durable remote call costs beside a direct client call, and what many
parked remote tasks cost while they wait.

What is measured
----------------
The runtime runs in this process (one worker, its remote poller) on a fresh embedded
PostgreSQL; each remote is bench/remote_fake.py, an MCP Tasks server in a process of its own.

* ``call``: one run makes ``--calls`` pairs of calls, alternating: ``ctx.call_tool`` (a durable
  remote task: the create with its idempotency key, the task id committed before the first
  poll, the poll, the result recorded) against a remote whose tasks complete at once, and a
  direct client call of the same tool (a plain httpx client: the same create and poll, nothing
  recorded). Target: the durable call's median latency at most 2x the direct call's median,
  both measured in the same run (the printed ceiling). Each sample is one call's first
  execution, from its start to its first return (a park and the run's replay inside it, if
  the call parked: the replay itself reads records and is not a sample); the summary line
  says how often the run was claimed (each claim after the first is such a replay).
* ``hold``: ``--tasks`` runs each call a remote whose tasks stay ``working``, asking for
  ``--poll-ms`` between polls; once every run is parked, the window of ``--duration`` seconds
  counts each task's polls, the runs' claims (a replay would be one) and this process's CPU
  time. Targets: no task is polled more often than its ``pollIntervalMs`` allows (at most
  ``duration / interval + 1`` polls), and no run is replayed while it waits. The CPU figure
  is printed per poll and as a share of one core.

* ``agent``: the same comparison for an A2A agent (bench/remote_agent.py, built with the A2A
  SDK's server, its tasks completing at once): ``ctx.ask_agent`` against the SDK's own client
  sending the same message (``returnImmediately``) and reading the task until it completed.
  Target: at most 2x, as for ``call``. Skipped (``--skip-agent``, or without the ``a2a``
  extra).

Each target row ends in ``ok`` or ``OVER``. ``--poll-late`` injects the fault the ``call``
target guards against (a call that waits its first poll interval before it looks, instead of
polling at once), which must turn that row OVER (tests/runtime/remote/test_bench.py).

Usage::

    python bench/remote.py [--calls 40] [--tasks 1000] [--duration 60] [--poll-ms 5000]
                           [--skip-hold] [--skip-agent] [--poll-late] [--dsn URL]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
from pydantic import BaseModel

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import tasks_get as tg  # noqa: E402 — the embedded database and port helpers

import tether  # noqa: E402
from tether.runtime.operations import Operations  # noqa: E402
from tether.runtime.remote import call as remote_call  # noqa: E402
from tether.runtime.remote.config import Remote  # noqa: E402
from tether.runtime.remote.implementations import PROTOCOLS  # noqa: E402
from tether.runtime.service import running  # noqa: E402
from tether.runtime.worker import WorkerSettings  # noqa: E402

CEILING = 2.0
FAKE = BENCH / "remote_fake.py"
AGENT = BENCH / "remote_agent.py"
VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS: {}}}
WORKER = WorkerSettings(concurrency=32, lease_s=30.0, poll_s=0.2)


class Pairs(BaseModel):
    calls: int
    url: str


class Nothing(BaseModel):
    pass


app = tether.App("bench-remote")


class Samples:
    """Each timed call's first start and first end, by run, row and position, in this process
    (the runs execute here). A run that parks is replayed: the replay re-enters the workflow's
    body, where a durable call already recorded returns its record at once, so a time taken
    there would be the record's read, not the call. Only a call's first execution is timed:
    from when it first began to when it first returned (the park and the wake included, as
    they are part of what the durable call costs), and a direct call is sent once per
    position, never again in a replay."""

    def __init__(self) -> None:
        self.began: dict[tuple[str, str, int], float] = {}
        self.ended: dict[tuple[str, str, int], float] = {}

    async def timed(
        self, run: str, row: str, i: int, call: Callable[[], Awaitable[Any]], *, durable: bool
    ) -> None:
        key = (run, row, i)
        if key in self.ended:
            if durable:
                await call()  # the replay reads the call's record, keeping its position
            return
        self.began.setdefault(key, time.perf_counter())
        await call()
        self.ended[key] = time.perf_counter()

    def ms(self, run: str, row: str, calls: int) -> list[float]:
        """The samples of one row of a run, in milliseconds, in call order."""
        keys = [(run, row, i) for i in range(calls)]
        return [(self.ended[k] - self.began[k]) * 1000 for k in keys]


SAMPLES = Samples()


@app.workflow
async def compare(ctx: tether.Context, pairs: Pairs) -> None:
    """Alternate durable remote calls and direct client calls, timed in `SAMPLES`."""
    run = ctx.execution_id
    async with httpx.AsyncClient(timeout=30) as client:
        for i in range(pairs.calls):
            durable = functools.partial(ctx.call_tool, "fast", "work", {"i": i})
            await SAMPLES.timed(run, "durable", i, durable, durable=True)
            direct = functools.partial(direct_call, client, pairs.url, i)
            await SAMPLES.timed(run, "direct", i, direct, durable=False)


@app.workflow
async def hold_one(ctx: tether.Context, nothing: Nothing) -> Any:
    """One remote task held `working` until the bench ends."""
    return await ctx.call_tool("held", "work", {})


#: The `a2a` extra is installed: the agent row runs.
AGENTS = "a2a" in PROTOCOLS


async def compare_agent(ctx: tether.Context, pairs: Pairs) -> None:
    """Alternate durable agent calls and direct SDK client calls, timed in `SAMPLES`."""
    from a2a.client import ClientConfig, create_client  # the `a2a` extra

    run = ctx.execution_id
    client = await create_client(pairs.url, ClientConfig(streaming=False, polling=True))
    try:
        for i in range(pairs.calls):
            durable = functools.partial(ctx.ask_agent, "agent", f"m{i}")
            await SAMPLES.timed(run, "durable", i, durable, durable=True)
            direct = functools.partial(direct_ask, client, i)
            await SAMPLES.timed(run, "direct", i, direct, durable=False)
    finally:
        await client.close()


if AGENTS:  # registered only where an agent remote can be configured
    app.workflow(compare_agent)


async def direct_ask(client: Any, i: int) -> Any:
    """The same message as the SDK's client sends it: the task at once, then read until it
    completed (once: it is done)."""
    from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState

    message = Message(message_id=f"direct-{i}", role=Role.ROLE_USER, parts=[Part(text=f"m{i}")])
    async for event in client.send_message(SendMessageRequest(message=message)):
        task = event.task
    while task.status.state != TaskState.TASK_STATE_COMPLETED:
        task = await client.get_task(GetTaskRequest(id=task.id, history_length=0))
    return task.artifacts


async def direct_call(client: httpx.AsyncClient, url: str, i: int) -> Any:
    """The same tool call as a plain client makes it: create, then poll (once: it is done)."""
    created = await rpc(client, url, "tools/call", {"name": "work", "arguments": {"i": i}}, "work")
    task = created["taskId"]
    while True:
        got = await rpc(client, url, "tasks/get", {"taskId": task}, task)
        if got["status"] == "completed":
            return got["result"]


async def rpc(
    client: httpx.AsyncClient, url: str, method: str, params: dict[str, Any], name: str
) -> Any:
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": VERSION,
        "mcp-method": method,
        "mcp-name": name,
    }
    response = await client.post(url, content=orjson.dumps(body), headers=headers)
    return orjson.loads(response.content)["result"]


@contextlib.asynccontextmanager
async def fake_remote(hold_s: float, poll_ms: int, logs: Path) -> AsyncIterator[str]:
    """bench/remote_fake.py in a process of its own; yields its MCP URL."""
    async with server(FAKE, logs, str(hold_s), str(poll_ms)) as port:
        yield f"http://127.0.0.1:{port}/mcp"


@contextlib.asynccontextmanager
async def server(script: Path, logs: Path, *args: str) -> AsyncIterator[int]:
    """`python SCRIPT PORT ARGS…` in a process of its own; yields its port once it listens."""
    port = tg.free_port()
    with (logs / f"{script.stem}-{port}.log").open("wb") as log:
        proc = subprocess.Popen(  # noqa: ASYNC220 — a server process, stopped below
            [sys.executable, str(script), str(port), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        async with asyncio.timeout(30):
            while True:
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                except OSError:
                    await asyncio.sleep(0.05)
                    continue
                writer.close()
                break
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def fake_stats(url: str) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=30) as client:
        result: dict[str, Any] = await rpc(client, url, "bench/stats", {}, "stats")
        return result


@contextlib.contextmanager
def poll_late(on: bool, interval_s: float) -> Iterator[None]:
    """The fault `--poll-late` injects: a call sleeps its poll interval before it polls."""
    if not on:
        yield
        return
    original = remote_call._Call._poll

    async def late(self: Any, proto: Any, task: str) -> Any:
        await asyncio.sleep(interval_s)
        return await original(self, proto, task)

    remote_call._Call._poll = late  # type: ignore[method-assign]  # the injected fault
    try:
        yield
    finally:
        remote_call._Call._poll = original  # type: ignore[method-assign]


def unused(url: str, *names: str) -> list[Remote]:
    """The remotes the app's other workflows name, configured but not called here."""
    return [
        Remote(n, url, protocol="a2a" if n == "agent" else "mcp-tasks")
        for n in names
        if n != "agent" or AGENTS
    ]


async def measure_calls(
    dsn: str, calls: int, fault: bool, logs: Path, hold_s: float = 0.0
) -> dict[str, Any]:
    """The call row; `hold_s`: how long each remote task stays `working` (0: it completes at
    the first poll; more makes every durable call park and its run replay)."""
    poll_ms = 100
    async with fake_remote(hold_s, poll_ms, logs) as url:
        remotes = [Remote("fast", url, poll_min_s=0.05), *unused(url, "held", "agent")]
        with poll_late(fault, poll_ms / 1000):
            return {**await compared(dsn, remotes, "compare", calls, url), "fault": fault}


async def measure_agent(dsn: str, calls: int, logs: Path) -> dict[str, Any]:
    async with server(AGENT, logs) as port:
        url = f"http://127.0.0.1:{port}/"
        remotes = [
            Remote("agent", url, protocol="a2a", poll_min_s=0.05),
            *unused(url, "fast", "held"),
        ]
        return await compared(dsn, remotes, "compare_agent", calls, url)


async def compared(
    dsn: str, remotes: list[Remote], workflow: str, calls: int, url: str
) -> dict[str, Any]:
    """One run of a comparing workflow (`calls` pairs of a durable call and a direct one to
    `url`): the latency of each, in milliseconds, each way, and how often the run was claimed
    (more than once: it parked and was replayed)."""
    async with running(
        dsn, app, worker_settings=WORKER, janitor_interval_s=None, remotes=remotes
    ) as rt:
        ops = Operations(rt.pool, app)
        run = (await ops.start(workflow, {"calls": calls, "url": url})).execution.id
        view = await ops.wait_for_end(run, timeout=600)
        attempts = await rt.pool.fetchval("SELECT attempt FROM executions WHERE id = $1", run)
    if view.current.status != "completed":
        raise RuntimeError(f"the {workflow} run ended {view.current.status}: {view.current.error}")
    return {
        "durable_ms": SAMPLES.ms(run, "durable", calls),
        "direct_ms": SAMPLES.ms(run, "direct", calls),
        "claimed": int(attempts),
    }


async def measure_hold(
    dsn: str, tasks: int, duration: float, poll_ms: int, logs: Path
) -> dict[str, Any]:
    async with fake_remote(3600.0, poll_ms, logs) as url:
        held = Remote("held", url)
        remotes = [held, *unused(url, "fast", "agent")]
        async with running(
            dsn, app, worker_settings=WORKER, janitor_interval_s=None, remotes=remotes
        ) as rt:
            ops = Operations(rt.pool, app)
            began = time.perf_counter()
            for _ in range(tasks):
                await ops.start("hold_one", {})
            async with asyncio.timeout(max(600.0, tasks * 0.5)):
                while True:
                    if await parked(rt.pool) >= tasks:
                        break
                    await asyncio.sleep(0.5)
            setup_s = time.perf_counter() - began
            before = (await fake_stats(url))["polls"], await claims(rt.pool), time.process_time()
            await asyncio.sleep(duration)
            after = (await fake_stats(url))["polls"], await claims(rt.pool), time.process_time()
    polls = [after[0].get(task, 0) - before[0].get(task, 0) for task in after[0]]
    return {
        "tasks": tasks,
        "setup_s": setup_s,
        "duration_s": duration,
        "interval_s": max(poll_ms / 1000, held.poll_min_s),
        "polls": polls,
        "replays": after[1] - before[1],
        "cpu_s": after[2] - before[2],
    }


async def parked(db: Any) -> int:
    return int(
        await db.fetchval(
            "SELECT count(*) FROM executions e JOIN remote_polls p ON p.execution_id = e.id "
            "WHERE e.workflow = 'hold_one' AND e.status = 'waiting'"
        )
    )


async def claims(db: Any) -> int:
    return int(
        await db.fetchval(
            "SELECT coalesce(sum(attempt), 0) FROM executions WHERE workflow = 'hold_one'"
        )
    )


def verdict(ok: bool) -> str:
    return "ok" if ok else "OVER"


def claimed(row: dict[str, Any]) -> str:
    """How often the row's run was claimed, when known: each claim after the first is a
    replay after a park (the samples are the calls' first executions all the same)."""
    return f" in one run claimed {row['claimed']}x" if "claimed" in row else ""


def report(
    calls: dict[str, Any] | None, hold: dict[str, Any] | None, agent: dict[str, Any] | None = None
) -> None:
    print(f"{'target':<40} {'baseline':>10} {'measured':>10} {'ratio':>7} {'ceiling':>8}  verdict")
    if calls is not None:
        durable = statistics.median(calls["durable_ms"])
        direct = statistics.median(calls["direct_ms"])
        ratio = durable / direct
        fault = " — FAULT INJECTED: first poll after an interval" if calls["fault"] else ""
        print(f"calls: {len(calls['durable_ms'])} pairs{claimed(calls)}; durable p90 "
              f"{statistics.quantiles(calls['durable_ms'], n=10)[-1]:.2f} ms, direct p90 "
              f"{statistics.quantiles(calls['direct_ms'], n=10)[-1]:.2f} ms{fault}")  # fmt: skip
        print(f"{'remote call median vs direct client':<40} {direct:>8.2f}ms {durable:>8.2f}ms "
              f"{ratio:>7.2f} {CEILING:>8.1f}  {verdict(ratio <= CEILING)}")  # fmt: skip
    if hold is not None:
        polls, duration, interval = hold["polls"], hold["duration_s"], hold["interval_s"]
        allowed = duration / interval + 1
        most = max(polls) if polls else 0
        total = sum(polls)
        print(f"hold: {hold['tasks']} tasks parked in {hold['setup_s']:.1f} s; "
              f"{total} polls in {duration:.0f} s ({statistics.mean(polls):.1f} per task, "
              f"interval {interval:.1f} s); worker CPU {hold['cpu_s']:.2f} s = "
              f"{hold['cpu_s'] / duration * 100:.1f} % of a core, "
              f"{hold['cpu_s'] / max(total, 1) * 1000:.2f} ms per poll")  # fmt: skip
        print(f"{'most polls of one task in the window':<40} {allowed:>10.1f} {most:>10d} "
              f"{most / allowed:>7.2f} {1.0:>8.1f}  {verdict(most <= allowed)}")  # fmt: skip
        print(f"{'runs replayed while they wait':<40} {0:>10d} {hold['replays']:>10d} "
              f"{'':>7} {'':>8}  {verdict(hold['replays'] == 0)}")  # fmt: skip
    if agent is not None:
        durable = statistics.median(agent["durable_ms"])
        direct = statistics.median(agent["direct_ms"])
        ratio = durable / direct
        print(f"agent: {len(agent['durable_ms'])} pairs{claimed(agent)}; durable p90 "
              f"{statistics.quantiles(agent['durable_ms'], n=10)[-1]:.2f} ms, direct p90 "
              f"{statistics.quantiles(agent['direct_ms'], n=10)[-1]:.2f} ms")  # fmt: skip
        print(f"{'agent call median vs direct SDK client':<40} {direct:>8.2f}ms {durable:>8.2f}ms "
              f"{ratio:>7.2f} {CEILING:>8.1f}  {verdict(ratio <= CEILING)}")  # fmt: skip


async def measure(dsn: str, args: argparse.Namespace) -> tuple[Any, Any, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as logs:
        calls_db = await tg.create_database(dsn, "bench_remote_calls")
        calls = await measure_calls(calls_db, args.calls, args.poll_late, Path(logs))
        hold = agent = None
        if not args.skip_hold:
            hold_db = await tg.create_database(dsn, "bench_remote_hold")
            hold = await measure_hold(hold_db, args.tasks, args.duration, args.poll_ms, Path(logs))
        if not args.skip_agent and AGENTS:
            agent_db = await tg.create_database(dsn, "bench_remote_agent")
            agent = await measure_agent(agent_db, args.calls, Path(logs))
        elif not args.skip_agent:
            print("agent: skipped (the `a2a` extra is not installed)")
        return calls, hold, agent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--poll-ms", type=int, default=5000)
    parser.add_argument("--skip-hold", action="store_true")
    parser.add_argument("--skip-agent", action="store_true")
    parser.add_argument("--poll-late", action="store_true", help="inject the fault")
    args = parser.parse_args(argv)
    with tg.database(args.dsn) as dsn:
        calls, hold, agent = asyncio.run(measure(dsn, args))
    report(calls, hold, agent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
