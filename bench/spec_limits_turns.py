"""Where a slow ``tasks/get`` spends its time while the largest documents are sent: each poll
of bench/spec_limits.py's poller is timed on the client, and every callback of the serving
process's event loop on the server, on one clock, so that each slow poll reads as the turns
it took and what ran between them.

What is measured
----------------
The app of bench/spec_limits_app.py is served in a process of its own (``--serve``, which
this script starts): ``tether.app.create_app`` under uvicorn on asyncio's own event loop (its
callbacks can be timed from Python; uvloop's cannot). Every callback is recorded (wall start
and end, thread CPU time, and what it is: a task's step of a ``tasks/get`` request, of a
document request or of something else; a read on a poller's connection, the sender's, or a
database connection), and so is every wait of the loop in its selector and every collection
of the cyclic garbage collector.

A poller of its own process (``--poll``; bench/loadgen.py's open loop: ``POLL_RATE`` a second
on ``POLL_LANES`` connections) records each poll's due time, when it was written and when its
answer was read. Two windows: ``idle`` (nothing else), then ``documents`` (this process sends
the largest refused and accepted documents back to back, as bench/spec_limits.py does).

For the polls slower than ``--slow-ms`` (default: the idle window's p99), the report splits
each one's time from its due time to its answer, averaged per slow poll: (1) the poller late
to write it; (2) before the server's first callback for it and (3) from that callback to its
last one, each split into what the loop ran (its own callbacks, other polls', a document's,
a database read; CPU time), the time the process did not run inside those callbacks
(preempted by the OS, or waiting for the interpreter lock), its waits in the selector (idle,
or waiting for PostgreSQL) and the rest; (4) from its last callback until the poller read the
answer. ``gc`` is the part spent in collections. Then the CPU time and the time spent waiting
on a run queue (``/proc/PID/task/*/schedstat``) of each process, per second of each window,
and the slowest polls under documents turn by turn.

Usage::

    python bench/spec_limits_turns.py [--duration 6] [--only accepted|refused]
                                      [--slow-ms MS] [--frames]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import collections
import contextlib
import gc
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCRIPT = str(Path(__file__).resolve())
BENCH = Path(SCRIPT).parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import httpx  # noqa: E402
import loadgen as lg  # noqa: E402 — beside this file
import spec_limits as sl  # noqa: E402
import tasks_get as tg  # noqa: E402

STOP_WAIT_SEC = 30.0
LARGE_REQUEST = 10_000  # bytes of body: a document, not a poll
SHOWN_SLOW = 12


# --------------------------------------------------------------------------------------
# The server (--serve)
# --------------------------------------------------------------------------------------


def where(handle: asyncio.Handle) -> str:
    """The innermost coroutines the task of `handle` is suspended in."""
    task = getattr(handle._callback, "__self__", None)
    frames: list[str] = []
    coro: Any = task.get_coro() if isinstance(task, asyncio.Task) else None
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        frames.append(f"{frame.f_code.co_name}:{frame.f_lineno}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return " > ".join(frames[-3:]) or "(done)"


def serve(port: int, dsn: str, out: Path, trace_frames: bool) -> None:
    """Serve the bench's app on `port`, recording every callback, selector wait and
    collection in `out` (JSON) when the server stops."""
    import uvicorn

    from tether.app import create_app
    from tether.loader import load_app
    from tether.settings import Settings

    calls: list[tuple[float, float, float, str]] = []  # (start, end, cpu, kind)
    waits: list[tuple[float, float]] = []
    collections_: list[tuple[float, float, int]] = []
    kinds: dict[int, str] = {}  # id(task) -> "get:PORT" / "doc"
    ports: dict[int, str] = {}  # peer port -> "get:PORT" / "doc"
    transports: dict[int, str] = {}  # id(transport) -> kind of reads on it
    run = asyncio.events.Handle._run

    def kind_of(handle: asyncio.Handle) -> str:
        owner = getattr(handle._callback, "__self__", None)
        if isinstance(owner, asyncio.Task):
            kind = kinds.get(id(owner))
            if kind is not None:
                return kind.replace(":", "-task:") if ":" in kind else f"{kind}-task"
            return "task:" + getattr(owner.get_coro(), "__qualname__", "?")
        if isinstance(owner, asyncio.Transport):
            known = transports.get(id(owner))
            if known is not None:
                return known
            protocol = getattr(owner, "_protocol", None)
            name = type(protocol).__name__
            if "Http" in name or "H11" in name:
                peer = owner.get_extra_info("peername")
                got = ports.get(peer[1]) if peer else None
                if got is None:
                    return "http-read"
                label = got.replace(":", "-read:") if ":" in got else f"{got}-read"
                transports[id(owner)] = label
                return label
            transports[id(owner)] = "db-read"
            return "db-read"
        return getattr(handle._callback, "__qualname__", repr(handle._callback))

    def timed(handle: asyncio.Handle) -> None:
        started = time.perf_counter()
        cpu = time.thread_time()
        run(handle)
        cpu = time.thread_time() - cpu
        ended = time.perf_counter()
        kind = kind_of(handle)
        if trace_frames and kind.startswith("get-task"):
            kind += " @" + where(handle)
        calls.append((started, ended, cpu, kind))

    gc_started = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_started[0] = time.perf_counter()
        else:
            collections_.append((gc_started[0], time.perf_counter(), info["generation"]))

    gc.callbacks.append(on_gc)
    asyncio.events.Handle._run = timed  # type: ignore[method-assign]
    settings = Settings.from_env(app=sl.APP_SPEC)
    web = create_app(load_app(settings.app), settings, dsn, tune_gc=True)

    async def tagged(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            length = dict(scope["headers"]).get(b"content-length", b"0")
            peer = scope["client"][1] if scope.get("client") else 0
            kind = "doc" if int(length) >= LARGE_REQUEST else f"get:{peer}"
            task = asyncio.current_task()
            if task is not None:
                kinds[id(task)] = kind
            if scope.get("client"):
                ports[scope["client"][1]] = kind
        await web(scope, receive, send)

    class Server(uvicorn.Server):
        async def serve(self, sockets: Any = None) -> None:
            loop = asyncio.get_running_loop()
            selector = loop._selector  # type: ignore[attr-defined]
            select = selector.select

            def timed_select(timeout: float | None = None) -> Any:
                started = time.perf_counter()
                try:
                    return select(timeout)
                finally:
                    waits.append((started, time.perf_counter()))

            selector.select = timed_select
            await super().serve(sockets)

    config = uvicorn.Config(tagged, host=tg.HOST, port=port, loop="asyncio", log_level="warning",
                            lifespan="on")  # fmt: skip
    try:
        Server(config).run()
    finally:
        out.write_text(json.dumps({"calls": calls, "waits": waits, "gc": collections_}),
                       encoding="utf-8")  # fmt: skip


# --------------------------------------------------------------------------------------
# The poller (--poll)
# --------------------------------------------------------------------------------------


async def poll_lane(
    spec: lg.Spec, window: lg.Window, pace: lg.Pace, out: list[list[float]]
) -> None:
    reader, writer = await asyncio.open_connection(spec.host, spec.port)
    local_port = writer.get_extra_info("sockname")[1]
    request = spec.request_bytes()
    try:
        while (due := pace.first) < window.closes:
            pace.first += pace.every
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            sent = time.perf_counter()
            writer.write(request)
            status, body = await lg._read_response(reader)
            done = time.perf_counter()
            if status != 200:
                raise RuntimeError(f"status {status}: {body[:200]!r}")
            if due >= window.opens:
                out.append([due, sent, done, local_port])
    finally:
        writer.close()


async def poll(spec_path: Path, duration: float, warmup: float, out_path: Path) -> None:
    spec = lg.Spec.load(spec_path)
    now = time.perf_counter()
    window = lg.Window(opens=now + warmup, closes=now + warmup + duration)
    rate, lanes = sl.POLL_RATE, sl.POLL_LANES
    paces = [lg.Pace(now + i / rate, lanes / rate) for i in range(lanes)]
    out: list[list[float]] = []
    lanes_done = asyncio.gather(*(poll_lane(spec, window, paces[i], out) for i in range(lanes)))
    await lg._announce(window)
    await lanes_done
    out_path.write_text(json.dumps(out), encoding="utf-8")  # noqa: ASYNC240 — after the window


# --------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------


def schedstat(pid: int) -> tuple[int, int]:
    """(CPU ns, ns waiting on a run queue) of all threads of `pid` so far."""
    cpu = delay = 0
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError):
                fields = (task / "schedstat").read_text().split()
                cpu += int(fields[0])
                delay += int(fields[1])
    return cpu, delay


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def sample(groups: dict[str, list[int]]) -> dict[str, tuple[int, int]]:
    got = {}
    for name, pids in groups.items():
        stats = [schedstat(pid) for pid in pids]
        got[name] = (sum(c for c, _ in stats), sum(d for _, d in stats))
    return got


async def window(
    spec_path: Path, duration: float, warmup: float, out: Path, groups: dict[str, list[int]]
) -> tuple[list[list[float]], dict[str, tuple[float, float]]]:
    command = [sys.executable, SCRIPT, "--poll", str(spec_path), f"--duration={duration}",
               f"--warmup={warmup}", "--out", str(out)]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    groups = {**groups, "poller": [proc.pid]}
    async with asyncio.timeout(warmup + duration + 60):
        await proc.stdout.readline()  # window-start
        before = sample(groups)
        await proc.stdout.readline()  # window-end
        after = sample(groups)
        if await proc.wait():
            raise RuntimeError("the poller failed")
    polls: list[list[float]] = json.loads(out.read_text(encoding="utf-8"))  # noqa: ASYNC240
    per_s = {
        name: ((after[name][0] - before[name][0]) / 1e6 / duration,
               (after[name][1] - before[name][1]) / 1e6 / duration)
        for name in groups
    }  # fmt: skip
    return polls, per_s


async def measure(dsn: str, args: argparse.Namespace) -> dict[str, Any]:
    await tg.migrate_db(dsn)
    logs = Path(tempfile.mkdtemp(prefix="spec-turns-"))
    out = logs / "server.json"
    port = tg.free_port()
    env = tg.tether_env(dsn)
    env.pop("TETHER_WORKERS", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (sl.SOURCES, env.get("PYTHONPATH")) if p)
    command = [sys.executable, SCRIPT, "--serve", "--port", str(port), "--dsn", dsn,
               "--out", str(out)] + (["--frames"] if args.frames else [])  # fmt: skip
    srv = tg.spawn("tether", command, env, port, logs)
    accepted = sl.largest_accepted(sl.DEFAULTS.spec_max_bytes, sl.DEFAULTS.spec_max_steps)
    refused = sl.largest_refused(sl.DEFAULTS.max_body_bytes)
    docs = [("largest refused", refused), ("largest accepted", accepted)]
    docs = [d for d in docs if args.only is None or d[0].endswith(args.only)]
    run_id = f"turns-{secrets.token_hex(4)}"
    result: dict[str, Any] = {}
    try:
        await tg.wait_listening(srv)
        async with httpx.AsyncClient(timeout=60.0) as client:
            task_id = await tg.start_task(client, srv.url, sl.bench_app.PARKED, {"label": "b"})
            await tg.wait_status(client, srv.url, task_id, "working", "waiting for signal")
            first = await sl.call_execute(
                client, srv.url, sl.start_args(accepted, sl.ACCEPTED_NAME, run_id)
            )
            if first != "ok":
                raise RuntimeError(f"the largest accepted document was refused: {first}")
        headers, body = tg.tasks_get(task_id)
        spec_path = logs / "tasks_get.json"
        request = {"port": port, "path": tg.PATH, "headers": headers}
        request.update(body=body.decode(), expect='"working"')
        spec_path.write_text(json.dumps(request))
        worker = children(srv.proc.pid)  # the document worker (and helpers)
        groups = {"server": [srv.proc.pid], "document worker": worker,
                  "postgres": [args.postmaster, *children(args.postmaster)],
                  "sender (this process)": [os.getpid()]}  # fmt: skip
        result["idle"], idle_sched = await window(
            spec_path, args.duration, args.warmup, logs / "idle.json", groups
        )
        until = time.perf_counter() + args.warmup + args.duration
        sent = sl.Sent()
        sender = asyncio.create_task(sl.send_documents(srv.url, docs, run_id, until, sent))
        result["documents"], docs_sched = await window(
            spec_path, args.duration, args.warmup, logs / "docs.json", groups
        )
        result["sched"] = {"idle": idle_sched, "documents": docs_sched}
        await sender
        result["sent"] = sent
    finally:
        srv.proc.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(srv.proc.wait, STOP_WAIT_SEC)
        await tg.stop([srv.proc])
    result["server"] = json.loads(out.read_text(encoding="utf-8"))
    saved = logs / "turns.json"
    saved.write_text(json.dumps({**result, "sent": vars(result["sent"])}), encoding="utf-8")
    print(f"raw records: {saved}")
    return result


# --------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------


@dataclass
class Split:
    """Time of slow polls, by where it went (milliseconds, summed)."""

    parts: dict[str, float] = field(default_factory=lambda: collections.defaultdict(float))

    def add(self, key: str, seconds: float) -> None:
        if seconds > 0:
            self.parts[key] += seconds * 1000


Call = tuple[float, float, float, str]


class Timeline:
    def __init__(self, server: dict[str, Any]) -> None:
        self.calls: list[Call] = sorted(tuple(c) for c in server["calls"])  # type: ignore[misc]
        self.starts = [c[0] for c in self.calls]
        self.waits = sorted(server["waits"])
        self.wait_starts = [w[0] for w in self.waits]
        self.gc = sorted(server["gc"])
        self.gc_starts = [g[0] for g in self.gc]

    def calls_in(self, a: float, b: float) -> list[Call]:
        i = max(0, bisect.bisect_left(self.starts, a) - 1)
        got = []
        while i < len(self.calls) and self.calls[i][0] < b:
            c = self.calls[i]
            if c[1] > a:
                got.append(c)
            i += 1
        return got

    def overlap(self, spans: list[Any], starts: list[float], a: float, b: float) -> float:
        i = max(0, bisect.bisect_left(starts, a) - 1)
        total = 0.0
        while i < len(spans) and spans[i][0] < b:
            total += max(0.0, min(b, spans[i][1]) - max(a, spans[i][0]))
            i += 1
        return total

    def split(self, split: Split, prefix: str, a: float, b: float, own: str) -> None:
        """What the loop did in [a, b): callbacks by kind (CPU, and time descheduled inside
        them), its selector, and the rest (between callbacks)."""
        busy = 0.0
        for start, end, cpu, kind in self.calls_in(a, b):
            part = max(0.0, min(b, end) - max(a, start))
            busy += part
            wall = end - start
            ran = part * (min(1.0, cpu / wall) if wall > 0 else 1.0)
            if kind.split(" @")[0].endswith(own):
                name = "own"
            elif kind.startswith("get-"):
                name = "other polls"
            else:
                name = kind
            split.add(f"{prefix}{name} (cpu)", ran)
            split.add(f"{prefix}(descheduled inside callbacks)", part - ran)
        select = self.overlap(self.waits, self.wait_starts, a, b)
        split.add(f"{prefix}(in selector)", select)
        split.add(f"{prefix}(between callbacks)", (b - a) - busy - select)


def analyse(polls: list[list[float]], tl: Timeline, slow_s: float) -> tuple[int, Split]:
    """The split of the polls at least `slow_s` long, averaged per poll."""
    total = Split()
    slow = [p for p in polls if p[2] - p[0] >= slow_s]
    for due, sent, done, port in slow:
        own = f":{int(port)}"
        total.add("1 poller late to write", sent - due)
        mine = [c for c in tl.calls_in(sent, done) if c[3].split(" @")[0].endswith(own)]
        if not mine:
            total.add("? no server callback seen", done - sent)
            continue
        tl.split(total, "2 before its first callback: ", sent, mine[0][0], own)
        tl.split(total, "3 from its first to last callback: ", mine[0][0], mine[-1][1], own)
        total.add("4 after its last callback, until read", done - mine[-1][1])
        total.add("(gc, inside the above)", tl.overlap(tl.gc, tl.gc_starts, sent, done))
    for key in total.parts:
        total.parts[key] /= max(1, len(slow))
    return len(slow), total


def p99(values: list[float]) -> float:
    return lg.percentile(sorted(values), 0.99)


def report(m: dict[str, Any], args: argparse.Namespace) -> None:
    tl = Timeline(m["server"])
    idle = [p[2] - p[0] for p in m["idle"]]
    docs = [p[2] - p[0] for p in m["documents"]]
    slow_s = args.slow_ms / 1000 if args.slow_ms else p99(idle)
    sent: sl.Sent = m["sent"]
    for kind, times in sorted(sent.seconds.items()):
        print(f"  {kind}: {len(times)} sent, median {statistics.median(times) * 1000:.1f} ms")
    print(f"p99 idle {p99(idle) * 1000:.2f} ms, under documents {p99(docs) * 1000:.2f} ms "
          f"(ratio {p99(docs) / p99(idle):.2f}); slow: >= {slow_s * 1000:.2f} ms")  # fmt: skip
    for name in ("idle", "documents"):
        sched = m["sched"][name]
        print(f"\n{name}: CPU and run-queue wait (ms a second of window), by process:")
        for proc, (cpu, delay) in sched.items():
            print(f"  {proc:<22} cpu {cpu:7.1f}   waiting to run {delay:6.1f}")
        count, split = analyse(m[name], tl, slow_s)
        print(f"{name}: {count} of {len(m[name])} polls slow; mean ms per slow poll:")
        for key, value in sorted(split.parts.items()):
            if value >= 0.01:
                print(f"  {value:7.3f}  {key}")
    print(
        "\nthe slowest polls under documents: their callbacks and others' of 0.2 ms or more"
        " (ms from due, +wall, cpu)"
    )
    slowest = sorted(m["documents"], key=lambda p: p[0] - p[2])[:SHOWN_SLOW]
    for due, sent, done, port in slowest:
        own = f":{int(port)}"
        line = [f"{(done - due) * 1000:6.2f} ms: sent +{(sent - due) * 1000:.2f}"]
        for start, end, cpu, kind in tl.calls_in(sent, done):
            mine = kind.split(" @")[0].endswith(own)
            if end - start >= 0.0002 or mine:
                name = (
                    ("OWN" + kind[kind.find(" @") :] if " @" in kind else "OWN") if mine else kind
                )
                at = f"@{(start - due) * 1000:.2f}+{(end - start) * 1000:.2f}/{cpu * 1000:.2f}"
                line.append(name + at)
        print("  " + ", ".join(line) + f", read@{(done - due) * 1000:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--duration", type=float, default=6.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--only", choices=["refused", "accepted"])
    parser.add_argument("--slow-ms", type=float)
    parser.add_argument("--frames", action="store_true", help="name where polls' steps stop")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--poll", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.port, args.dsn, args.out, args.frames)
        return 0
    if args.poll:
        asyncio.run(poll(args.poll, args.duration, args.warmup, args.out))
        return 0
    with tg.embedded_postgres() as (dsn, pgdata):
        args.postmaster = tg.postmaster_pid(pgdata)
        report(asyncio.run(measure(dsn, args)), args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
