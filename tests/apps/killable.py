"""Workflows for the process-level durability tests (tests/e2e).

Worker subprocesses load this file (`python -m tether worker tests/apps/killable.py:app`).
Side effects leave evidence the tests count afterwards:

- `durable_steps` inserts rows `(execution_id, step, pid)` into a `side_effects` table the test
  creates in its database, from transaction steps (the insert commits with the checkpoint, so
  it is exactly-once) and from one plain step (its own connection: at-least-once in general,
  exactly-once when no crash happens inside it). `KILL_AT=<point>` makes the worker SIGKILL
  itself at that point (see KILL_POINTS).
- `three_appends` appends `"{execution_id} {step}\\n"` to `$SIDE_EFFECT_DIR/<pid>.log` from three
  plain steps.
- `poison` is a poison run: its step ends the worker process with `os._exit(1)` every time
  (when `POISON_EXIT=1`, so a test process that loads this app by mistake does not die).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import asyncpg
from pydantic import BaseModel

from tether.runtime.context import Context
from tether.runtime.exposure import Exposure
from tether.runtime.registry import App

app = App("killable")

# Where `durable_steps` can kill its worker, in the order a run reaches them.
KILL_POINTS = ("in_t1", "after_t1", "after_plain", "after_t2", "after_sleep", "before_return")
SLEEP_S = 0.2


def kill_point(point: str) -> None:
    """Die at once, as a power cut would (no cleanup, no lease release), if KILL_AT == point."""
    if point not in KILL_POINTS:
        raise ValueError(f"unknown kill point {point!r}")
    if os.environ.get("KILL_AT") == point:
        os.kill(os.getpid(), signal.SIGKILL)


class Job(BaseModel):
    n: int


class Receipt(BaseModel):
    """What `durable_steps` returns: its input, and the side_effects row id of each step."""

    n: int
    ids: dict[str, int]


async def record(conn: asyncpg.Connection, execution_id: str, step: str) -> int:
    """A transaction step: the insert commits with the checkpoint or not at all."""
    row_id: int = await conn.fetchval(
        "INSERT INTO side_effects (execution_id, step, pid) VALUES ($1, $2, $3) RETURNING id",
        execution_id,
        step,
        os.getpid(),
    )
    if step == "t1":
        kill_point("in_t1")  # inserted but uncommitted: must roll back
    return row_id


async def record_plain(execution_id: str, step: str) -> int:
    """A plain step: commits on its own connection, before the step's checkpoint."""
    # Its own connection, keeping no prepared statement: this works behind a pooler as well.
    conn = await asyncpg.connect(os.environ["TETHER_DATABASE_URL"], statement_cache_size=0)
    try:
        row_id: int = await conn.fetchval(
            "INSERT INTO side_effects (execution_id, step, pid) VALUES ($1, $2, $3) RETURNING id",
            execution_id,
            step,
            os.getpid(),
        )
    finally:
        await conn.close()
    return row_id


@app.workflow
async def durable_steps(ctx: Context, job: Job) -> Receipt:
    """Transaction, plain step, transaction, durable sleep, transaction, with kill points."""
    ids: dict[str, int] = {}
    ids["t1"] = await ctx.transaction(record, ctx.execution_id, "t1", name="t1")
    kill_point("after_t1")
    ids["plain"] = await ctx.step(record_plain, ctx.execution_id, "plain", name="plain")
    kill_point("after_plain")
    ids["t2"] = await ctx.transaction(record, ctx.execution_id, "t2", name="t2")
    kill_point("after_t2")
    await ctx.sleep(SLEEP_S)
    kill_point("after_sleep")
    ids["t3"] = await ctx.transaction(record, ctx.execution_id, "t3", name="t3")
    kill_point("before_return")
    return Receipt(n=job.n, ids=ids)


def append_line(execution_id: str, step: str, value: int) -> int:
    """A plain step whose only effect is one line in this process's evidence file."""
    path = Path(os.environ["SIDE_EFFECT_DIR"]) / f"{os.getpid()}.log"
    with path.open("a", encoding="utf-8") as fh:
        fh.write(f"{execution_id} {step}\n")
    return value + 1


@app.workflow
async def three_appends(ctx: Context, job: Job) -> int:
    """Three plain steps, each adding one; returns n + 3."""
    value = job.n
    for step in ("a", "b", "c"):
        value = await ctx.step(append_line, ctx.execution_id, step, value, name=step)
    return value


def die() -> int:
    """A plain step that kills its worker process, as a native crash would."""
    if os.environ.get("POISON_EXIT") != "1":
        raise RuntimeError("POISON_EXIT=1 not set: refusing to end this process")
    os._exit(1)


@app.workflow(expose=Exposure(tool_set=True))
async def poison(ctx: Context) -> int:
    """Records a step (progress), then dies in the next one, on every try."""
    await ctx.step(lambda: 1, name="before")
    return int(await ctx.step(die, name="die"))
