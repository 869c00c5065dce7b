"""The console's live pages: from a run's change to an open run page's SSE stream showing it
(target: p99 ≤ 100 ms with 100 open run pages).

One process serves the console (uvicorn on loopback, the embedded PostgreSQL unless ``--dsn``)
for tests/apps/answering.py; ``--pages`` runs are parked on an approval and each has an open
run-page event stream (GET /console/runs/{id}/events, as the page's EventSource opens it).
Then, one at a time, a signal nobody waits for is sent to a run (it is buffered: a history
event, one ``tether_change`` notification) and the delay is timed from just before the write
to the stream's frame carrying the re-rendered page — and, as the ceiling measured in the same
run, to a raw LISTEN connection's notification for the same change.

Usage: ``python bench/console.py [--dsn URL] [--pages 100] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from pathlib import Path

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.dags import server
from tests.apps.answering import app
from tests.e2e.conftest import on_loopback

from tether.app import create_app
from tether.settings import Settings

TARGET_MS = 100.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def drain(queue: asyncio.Queue[float]) -> None:
    while not queue.empty():
        queue.get_nowait()


async def follow(http: httpx.AsyncClient, url: str, frames: asyncio.Queue[float]) -> None:
    """Read one run page's stream; put the arrival time of each `update` frame."""
    async with http.stream("GET", url) as stream:
        async for line in stream.aiter_lines():
            if line == "event: update":
                frames.put_nowait(time.perf_counter())


async def measure(dsn: str, pages: int, rounds: int) -> tuple[list[float], list[float]]:
    settings = Settings(
        database_url=dsn,
        console=True,
        poll_s=0.5,
        janitor_interval_s=3600.0,
        max_streams_per_token=pages + 10,  # every page is the dev admin, from one address
    )
    web = create_app(app, settings, dsn)
    async with on_loopback(web, "/console") as base:
        ops = web.state.runtime.ops
        runs = [(await ops.start("gate", {})).execution.id for _ in range(pages)]
        for run_id in runs:
            await ops.wait_until(run_id, lambda r: r.status == "waiting", timeout=30)
        heard: dict[str, asyncio.Queue[float]] = {r: asyncio.Queue() for r in runs}
        raw = await asyncpg.connect(dsn)
        await raw.add_listener(
            "tether_change",
            lambda _c, _p, _ch, rid: rid in heard and heard[rid].put_nowait(time.perf_counter()),
        )
        frames = {r: asyncio.Queue[float]() for r in runs}
        limits = httpx.Limits(max_connections=pages + 10)
        async with (
            httpx.AsyncClient(timeout=60.0, limits=limits) as http,
            asyncio.TaskGroup() as tg,
        ):
            readers = [
                tg.create_task(follow(http, f"{base}/runs/{r}/events", frames[r])) for r in runs
            ]
            for r in runs:  # each page has its first frame: every stream is open
                await asyncio.wait_for(frames[r].get(), 30)
            sse, listen = [], []
            for k in range(rounds):
                for r in runs:
                    await asyncio.sleep(0.01)  # let the last change's echoes arrive
                    drain(frames[r])
                    drain(heard[r])
                    t0 = time.perf_counter()
                    await ops.signal(r, "poke", {"k": k})
                    t_sse = await asyncio.wait_for(frames[r].get(), 10)
                    t_raw = await asyncio.wait_for(heard[r].get(), 10)
                    sse.append((t_sse - t0) * 1000)
                    listen.append((t_raw - t0) * 1000)
            for task in readers:
                task.cancel()
        with contextlib.suppress(Exception):
            await raw.close()
    return sse, listen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="PostgreSQL URL (default: an embedded server under /tmp)")
    parser.add_argument("--pages", type=int, default=100, help="open run pages (SSE streams)")
    parser.add_argument("--rounds", type=int, default=3, help="changes per run")
    a = parser.parse_args()
    with server(a.dsn) as dsn:
        sse, listen = asyncio.run(measure(dsn, a.pages, a.rounds))
    print(f"{a.pages} open run pages, {len(sse)} changes, one at a time")
    print(f"{'path':<34} {'p50 ms':>8} {'p99 ms':>8}")
    print(
        f"{'change -> raw LISTEN (ceiling)':<34} {pct(listen, 0.5):8.2f} {pct(listen, 0.99):8.2f}"
    )
    print(f"{'change -> run page SSE frame':<34} {pct(sse, 0.5):8.2f} {pct(sse, 0.99):8.2f}")
    own = [s - r for s, r in zip(sse, listen, strict=True)]
    print(f"{'  of which after the notification':<34} {pct(own, 0.5):8.2f} {pct(own, 0.99):8.2f}")
    p99 = pct(sse, 0.99)
    ceiling = max(pct(listen, 0.99), 0.001)
    print(
        f"p99 against the ceiling: {p99 / ceiling:.1f}x; target p99 <= {TARGET_MS:.0f} ms: "
        f"{'ok' if p99 <= TARGET_MS else 'OVER'}"
    )


if __name__ == "__main__":
    main()
