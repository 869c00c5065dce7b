"""Notifications to people: how soon a wait's webhook arrives, and 1,000 waits at once through
a receiver that fails every third request.

Latency: each sample starts a run that asks for an approval; its park writes the outbox row
(the trigger, in the park's transaction), and the process's sender delivers it to an HTTP
receiver on loopback. A latency is the receiver's arrival time minus the row's `created_at`
(the start of the park's transaction, PostgreSQL's clock on this host). Samples are spaced,
so each measures one notification alone. Target: p99 ≤ 200 ms.

Burst: `--burst` runs start at once and park together; the receiver answers 500 to every third
request (the 3rd, 6th, ...), so a third of the attempts are retried. It checks that every
notification is delivered, and that none is accepted twice (by delivery id).

`--fault no-wake` runs the sender without its wake-up (the outbox's NOTIFY), so it finds new
rows only by polling every `--fault-poll-s`: the latency row must turn OVER.

Usage::

    python bench/notify.py [--dsn URL] [--samples 200] [--burst 1000] [--fault no-wake]

Without ``--dsn`` an embedded PostgreSQL is started under /tmp and stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.dagu_wait import database
from tests.receivers import HttpReceiver, Received, http_receiver

from tether.runtime.context import Context
from tether.runtime.notify.channels import WebhookChannel
from tether.runtime.notify.config import NotifySetup, SenderSettings
from tether.runtime.notify.links import ConsoleLinks
from tether.runtime.notify.sender import Sender
from tether.runtime.registry import App
from tether.runtime.service import Runtime, running
from tether.runtime.worker import WorkerSettings

CEILING_MS = 200.0
URL_ENV = "TETHER_BENCH_HOOK_URL"
SECRET_ENV = "TETHER_BENCH_HOOK_SECRET"  # noqa: S105 — a variable's name, not a secret
CREATED = "SELECT extract(epoch FROM created_at) FROM outbox WHERE delivery_id = $1"


def bench_app() -> App:
    app = App("notify-bench")
    hook = WebhookChannel(
        name="bench", url_env=URL_ENV, secret_env=SECRET_ENV, events=("wait.opened",)
    )

    @app.workflow(notify=[hook])
    async def ask(ctx: Context) -> str:
        await ctx.approval("go", prompt="Go ahead?", inputs=["ticket"])
        return "done"

    return app


def sender_settings(args: argparse.Namespace) -> SenderSettings:
    return SenderSettings(
        poll_s=args.fault_poll_s if args.fault == "no-wake" else 2.0,
        retry_base_s=0.05,
        retry_max_s=0.5,
        max_attempts=20,
    )


@contextlib.asynccontextmanager
async def tether(dsn: str, args: argparse.Namespace) -> AsyncIterator[Runtime]:
    """The runtime with its sender, or (fault) with a sender that only polls."""
    app = bench_app()
    links = ConsoleLinks("https://tether.example.com")
    workers = WorkerSettings(concurrency=64, poll_s=0.5)
    if args.fault != "no-wake":
        setup = NotifySetup(sender=sender_settings(args), links=links)
        async with running(dsn, app, worker_settings=workers, notify=setup) as rt:
            yield rt
        return
    async with running(
        dsn, app, worker_settings=workers, notify=NotifySetup(sender=None, links=links)
    ) as rt:
        (routed,) = app.notifications.routed
        resolved = {routed.channel.name: routed.channel.resolve(os.environ)}
        sender = Sender(rt.pool, resolved, links, sender_settings(args), listener=None)
        task = asyncio.create_task(sender.run())
        try:
            yield rt
        finally:
            sender.stop()
            await task


async def latency(rt: Runtime, receiver: HttpReceiver, samples: int) -> list[float]:
    """Milliseconds from each park's transaction to its webhook's arrival."""
    out: list[float] = []
    for _ in range(samples):
        before = len(receiver.received)
        await rt.ops.start("ask")

        def arrived(got: list[Received], n: int = before) -> bool:
            return len(got) > n

        await receiver.wait_for(arrived, timeout=30)
        got = receiver.received[before]
        created = await rt.pool.fetchval(CREATED, got.delivery_id)
        out.append((got.at - float(created)) * 1000.0)
        await asyncio.sleep(0.02)  # spaced: one notification at a time
    return out


async def burst(rt: Runtime, receiver: HttpReceiver, n: int) -> dict[str, Any]:
    """Start `n` runs at once; wait until each notification is accepted."""
    t0 = time.perf_counter()
    await asyncio.gather(*(rt.ops.start("ask") for _ in range(n)))

    def accepted(got: list[Received]) -> bool:
        return len({r.delivery_id for r in got if r.status == 200}) >= n

    await receiver.wait_for(accepted, timeout=600)
    elapsed = time.perf_counter() - t0
    ok = Counter(r.delivery_id for r in receiver.received if r.status == 200)
    rows = await rt.pool.fetchval("SELECT count(*) FROM outbox")
    return {
        "runs": n,
        "rows": rows,
        "accepted": len(ok),
        "accepted_twice": sum(1 for c in ok.values() if c > 1),
        "requests": len(receiver.received),
        "refused": sum(1 for r in receiver.received if r.status != 200),
        "elapsed_s": elapsed,
    }


async def measure(dsn: str, args: argparse.Namespace) -> dict[str, Any]:
    os.environ[SECRET_ENV] = "bench-secret"
    result: dict[str, Any] = {}
    async with http_receiver() as receiver:
        os.environ[URL_ENV] = receiver.url
        async with tether(dsn, args) as rt:
            await rt.pool.execute("TRUNCATE outbox")
            await latency(rt, receiver, min(5, args.samples))  # warm-up
            result["latency_ms"] = await latency(rt, receiver, args.samples)
    if args.burst:
        async with http_receiver(lambda i, _r: 500 if i % 3 == 2 else 200) as receiver:
            os.environ[URL_ENV] = receiver.url
            async with tether(dsn, args) as rt:
                await rt.pool.execute("TRUNCATE outbox")
                result["burst"] = await burst(rt, receiver, args.burst)
    return result


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def report(m: dict[str, Any], args: argparse.Namespace) -> bool:
    """Print the rows; True when every target holds."""
    lat = m["latency_ms"]
    worst = p99(lat)
    verdict = "ok" if worst <= CEILING_MS else "OVER"
    print(f"fault: {args.fault or 'none'}")
    print(f"{'case':<10} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'ceiling':>8} verdict")
    print(
        f"{'latency':<10} {statistics.median(lat):8.1f} {worst:8.1f} {max(lat):8.1f} "
        f"{CEILING_MS:8.1f} {verdict}"
    )
    ok = verdict == "ok"
    if "burst" in m:
        b = m["burst"]
        good = b["accepted"] == b["runs"] == b["rows"] and b["accepted_twice"] == 0
        print(
            f"burst      {b['runs']} waits: {b['rows']} rows, {b['accepted']} accepted, "
            f"{b['accepted_twice']} accepted twice, {b['requests']} requests "
            f"({b['refused']} refused by the receiver) in {b['elapsed_s']:.1f} s "
            f"{'ok' if good else 'OVER'}"
        )
        ok = ok and good
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--dsn", help="a PostgreSQL URL (default: an embedded one under /tmp)")
    parser.add_argument(
        "--samples", type=int, default=200, help="latency samples, one wait at a time"
    )
    parser.add_argument(
        "--burst", type=int, default=1000, help="waits opening at once (0: skip the burst)"
    )
    parser.add_argument(
        "--fault",
        choices=("no-wake",),
        default=None,
        help="no-wake: the sender only polls (the latency row must turn OVER)",
    )
    parser.add_argument(
        "--fault-poll-s", type=float, default=1.0, help="the polling interval under no-wake"
    )
    args = parser.parse_args(argv)
    with database(args.dsn) as dsn:
        measured = asyncio.run(measure(dsn, args))
    return 0 if report(measured, args) else 1


if __name__ == "__main__":
    sys.exit(main())
