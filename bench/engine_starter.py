"""The Tether starter of bench/engine.py: a process of its own, as DBOS's enqueuer is.

Two modes, each printing one JSON line on stdout when done:

* as fast as it can (default): ``--runs N`` starts of the 3-step workflow (input 0..N-1) from
  ``--lanes`` concurrent lanes over a pool of that size. ``--batch 1`` starts one run per
  statement (``Operations.start``, as DBOS's ``Queue.enqueue`` does); ``--batch B`` starts B
  runs per statement (``Operations.start_many``). Prints ``{"seconds": …}``.
* at a fixed rate: ``--rate R`` issues ``--runs N`` single starts on an open-loop schedule
  (start i is due at i / R seconds), each as its own task, and prints the latency of each
  start (from when it was due to when its insert had committed) as ``{"latencies_ms": […]}``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import orjson
from engine_app import WORKFLOW_NAME, app

from tether.runtime.operations import Operations, StartRequest
from tether.storage import pool


async def _as_fast_as_possible(ops: Operations, runs: int, lanes: int, batch: int) -> float:
    chunks = iter([list(range(i, min(i + batch, runs))) for i in range(0, runs, batch)])

    async def lane() -> None:
        for chunk in chunks:
            if batch == 1:
                await ops.start(WORKFLOW_NAME, chunk[0])
                continue
            outcomes = await ops.start_many([StartRequest(WORKFLOW_NAME, v) for v in chunk])
            failed = [o for o in outcomes if isinstance(o, Exception)]
            if failed:
                raise failed[0]

    started = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(lanes)))
    return time.perf_counter() - started


async def _at_rate(ops: Operations, runs: int, rate: float) -> list[float]:
    latencies: list[float] = []
    origin = time.perf_counter()

    async def one(value: int, due: float) -> None:
        await ops.start(WORKFLOW_NAME, value)
        latencies.append((time.perf_counter() - due) * 1000.0)

    tasks = []
    for value in range(runs):
        due = origin + value / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(value, due)))
    await asyncio.gather(*tasks)
    return latencies


async def _main(args: argparse.Namespace) -> dict[str, object]:
    db = await pool.create_pool(args.db_url, min_size=args.lanes, max_size=args.lanes)
    try:
        ops = Operations(db, app)
        await ops.start_many([])  # warm the imports; nothing is inserted
        if args.rate:
            return {"latencies_ms": await _at_rate(ops, args.runs, args.rate)}
        return {"seconds": await _as_fast_as_possible(ops, args.runs, args.lanes, args.batch)}
    finally:
        await db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db-url", required=True)
    parser.add_argument("--runs", type=int, required=True)
    parser.add_argument("--lanes", type=int, default=8)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rate", type=float, default=0.0)
    result = asyncio.run(_main(parser.parse_args()))
    sys.stdout.write(orjson.dumps(result).decode() + "\n")


if __name__ == "__main__":
    main()
