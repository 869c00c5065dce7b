"""The event loop's pieces of work per caller-supplied document: every callback the serving
process's loop runs is timed while the largest documents of bench/spec_limits.py are sent,
and the long ones are printed by where they started and where they stopped.

What is measured
----------------
The app of bench/spec_limits_app.py is served in a process of its own (``--serve``, which
this script starts): ``tether.app.create_app`` under uvicorn on asyncio's own event loop (its
callbacks can be timed from Python; uvloop's cannot), with every callback timed in the
thread's CPU time (so time the machine gave to other processes does not count). This process
sends the largest accepted document once (it registers the DAG), then ``--documents`` of each
kind (``--only`` one kind), one after the other, then stops the server and reads back each
callback that took ``--threshold-ms`` or longer. A callback that runs a task's step is named
by the coroutines it resumed and the ones it stopped in (``function:line``, innermost last),
so one document's work reads as the pieces between its awaits.

Usage::

    python bench/spec_limits_pieces.py [--documents 40] [--only accepted|refused]
                                       [--threshold-ms 0.15] [--dsn URL]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SCRIPT = str(Path(__file__).resolve())
BENCH = Path(SCRIPT).parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import httpx  # noqa: E402
import spec_limits as sl  # noqa: E402 — beside this file
import tasks_get as tg  # noqa: E402 — the servers' helpers

FRAMES = 3  # coroutines named per end of a callback, innermost last
SHOWN = 20  # groups printed, longest first
STOP_WAIT_SEC = 30.0


# --------------------------------------------------------------------------------------
# The server (--serve)
# --------------------------------------------------------------------------------------


def where(handle: asyncio.Handle) -> str:
    """Where a callback is: the coroutines a task is suspended in, or the callback's name."""
    task = getattr(handle._callback, "__self__", None)
    if not isinstance(task, asyncio.Task):
        return getattr(handle._callback, "__qualname__", repr(handle._callback))
    frames: list[str] = []
    coro: Any = task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        frames.append(f"{frame.f_code.co_name}:{frame.f_lineno}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return " > ".join(frames[-FRAMES:]) or "(done)"


def serve(port: int, dsn: str, threshold_s: float, out: Path) -> None:
    """Serve the bench's app on `port`, recording each callback of `threshold_s` CPU seconds
    or more in `out` (JSON) when the server stops."""
    import uvicorn

    from tether.app import create_app
    from tether.loader import load_app
    from tether.settings import Settings

    records: list[tuple[float, str, str]] = []
    run = asyncio.events.Handle._run

    def timed(handle: asyncio.Handle) -> None:
        started_at = where(handle)
        started = time.thread_time()
        run(handle)
        took = time.thread_time() - started
        if took >= threshold_s:
            records.append((took, started_at, where(handle)))

    asyncio.events.Handle._run = timed  # type: ignore[method-assign]
    settings = Settings.from_env(app=sl.APP_SPEC)
    web = create_app(load_app(settings.app), settings, dsn, tune_gc=True)
    config = uvicorn.Config(web, host=tg.HOST, port=port, loop="asyncio", log_level="warning")
    try:
        uvicorn.Server(config).run()
    finally:
        out.write_text(json.dumps(records), encoding="utf-8")


# --------------------------------------------------------------------------------------
# The documents
# --------------------------------------------------------------------------------------


async def measure(dsn: str, args: argparse.Namespace) -> list[tuple[float, str, str]]:
    await tg.migrate_db(dsn)
    logs = Path(tempfile.mkdtemp(prefix="spec-pieces-"))
    out = logs / "callbacks.json"
    port = tg.free_port()
    env = tg.tether_env(dsn)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (sl.SOURCES, env.get("PYTHONPATH")) if p)
    command = [sys.executable, SCRIPT, "--serve", "--port", str(port), "--dsn", dsn,
               f"--threshold-ms={args.threshold_ms}", "--out", str(out)]  # fmt: skip
    srv = tg.spawn("tether", command, env, port, logs)
    accepted = sl.largest_accepted(sl.DEFAULTS.spec_max_bytes, sl.DEFAULTS.spec_max_steps)
    refused = sl.largest_refused(sl.DEFAULTS.max_body_bytes)
    docs = [("refused", refused), ("accepted", accepted)]
    docs = [d for d in docs if args.only in (None, d[0])]
    run_id = f"pieces-{secrets.token_hex(4)}"
    try:
        await tg.wait_listening(srv)
        async with httpx.AsyncClient(timeout=60.0) as client:
            first = await sl.call_execute(
                client, srv.url, sl.start_args(accepted, sl.ACCEPTED_NAME, run_id)
            )
            if first != "ok":
                raise RuntimeError(f"the largest accepted document was refused: {first}")
            for _ in range(args.documents):
                for _, spec in docs:
                    await sl.call_execute(
                        client, srv.url, sl.start_args(spec, sl.ACCEPTED_NAME, run_id)
                    )
    finally:
        srv.proc.send_signal(signal.SIGINT)  # uvicorn's graceful stop, then the records
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(srv.proc.wait, STOP_WAIT_SEC)
        await tg.stop([srv.proc])
    records: list[tuple[float, str, str]] = json.loads(out.read_text(encoding="utf-8"))
    return records


def report(records: list[tuple[float, str, str]], args: argparse.Namespace) -> None:
    groups: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    for took, started_at, stopped_at in records:
        groups[(started_at, stopped_at)].append(took * 1000)
    kinds = args.only or "accepted and refused"
    print(f"{args.documents} documents of each kind ({kinds}); callbacks of "
          f"{args.threshold_ms} ms of CPU or more, by where they started ==> stopped:")  # fmt: skip
    print(f"{'count':>6} {'median':>8} {'max':>8}  piece")
    ordered = sorted(groups.items(), key=lambda kv: -statistics.median(kv[1]))
    for (started_at, stopped_at), took in ordered[:SHOWN]:
        print(f"{len(took):>6} {statistics.median(took):>6.2f}ms {max(took):>6.2f}ms  "
              f"{started_at}  ==>  {stopped_at}")  # fmt: skip


@contextlib.contextmanager
def database(dsn: str | None) -> Iterator[str]:
    if dsn:
        yield dsn
        return
    with tg.embedded_postgres() as (uri, _):
        yield uri


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--only", choices=["refused", "accepted"])
    parser.add_argument("--threshold-ms", type=float, default=0.15)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.port, args.dsn, args.threshold_ms / 1000, args.out)
        return 0
    with database(args.dsn) as dsn:
        report(asyncio.run(measure(dsn, args)), args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
