"""The workflows the reliability suite drives (every process loads `reliability/app.py:app`).

Each effect a run has is one row in `rel_effects`, inserted by a transaction step
(`ctx.transaction`): the insert commits together with the step's checkpoint, so counting rows
per (execution_id, step) checks exactly-once. The table has no unique constraint on purpose: a
duplicate would be visible, not refused.

- `rel_steps`: three transaction steps; returns {n, total}.
- `rel_timer`: transaction, durable sleep, transaction.
- `rel_approval`: transaction, approval gate (answered through tasks/update), a transaction
  that records the ticket it was given.
- `rel_cancel`: transaction, then parks (approval never answered, or a long sleep) until the
  driver cancels the task.
- `rel_lease`: two transactions; the second holds its transaction open for `REL_HOLD_S`
  seconds after its insert when that variable is set (the paused-worker scenario).
"""

from __future__ import annotations

import asyncio
import os
from typing import Literal

import asyncpg
from pydantic import BaseModel

from tether.runtime.context import Context
from tether.runtime.registry import App
from tether.runtime.waits import Approved

app = App("reliability")

SCHEMA = """
CREATE TABLE IF NOT EXISTS rel_effects (
    id           bigserial   PRIMARY KEY,
    execution_id text        NOT NULL,
    step         text        NOT NULL,
    value        text,
    pid          integer     NOT NULL,
    at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS rel_effects_run ON rel_effects (execution_id, step);
"""


class StepsJob(BaseModel):
    n: int


class StepsOut(BaseModel):
    n: int
    total: int


class TimerJob(BaseModel):
    n: int
    sleep_s: float


class ApprovalJob(BaseModel):
    n: int


class ApprovalOut(BaseModel):
    n: int
    ticket: str


class CancelJob(BaseModel):
    n: int
    mode: Literal["approval", "sleep"]


async def effect(conn: asyncpg.Connection, execution_id: str, step: str, value: str) -> int:
    """The transaction step: one row that commits with the checkpoint or not at all."""
    row_id: int = await conn.fetchval(
        "INSERT INTO rel_effects (execution_id, step, value, pid) VALUES ($1, $2, $3, $4)"
        " RETURNING id",
        execution_id,
        step,
        value,
        os.getpid(),
    )
    return row_id


async def held_effect(conn: asyncpg.Connection, execution_id: str, step: str, value: str) -> int:
    """Like `effect`, but keeps the transaction open for REL_HOLD_S seconds after the insert."""
    row_id = await effect(conn, execution_id, step, value)
    hold = float(os.environ.get("REL_HOLD_S", "0") or 0)
    if hold > 0:
        await asyncio.sleep(hold)
    return row_id


@app.workflow(mcp=True)
async def rel_steps(ctx: Context, job: StepsJob) -> StepsOut:
    total = 0
    for step in ("s1", "s2", "s3"):
        await ctx.transaction(effect, ctx.execution_id, step, str(job.n), name=step)
        total += job.n
    return StepsOut(n=job.n, total=total)


@app.workflow(mcp=True)
async def rel_timer(ctx: Context, job: TimerJob) -> int:
    await ctx.transaction(effect, ctx.execution_id, "before", str(job.n), name="before")
    await ctx.sleep(job.sleep_s)
    await ctx.transaction(effect, ctx.execution_id, "after", str(job.n), name="after")
    return job.n


@app.workflow(mcp=True)
async def rel_approval(ctx: Context, job: ApprovalJob) -> ApprovalOut:
    await ctx.transaction(effect, ctx.execution_id, "asked", str(job.n), name="asked")
    decision = await ctx.approval(
        "go", prompt=f"Approve job {job.n}?", inputs=["ticket"], required=["ticket"]
    )
    ticket = decision.inputs["ticket"] if isinstance(decision, Approved) else "pushed-back"
    await ctx.transaction(effect, ctx.execution_id, "answered", str(ticket), name="answered")
    return ApprovalOut(n=job.n, ticket=str(ticket))


@app.workflow(mcp=True)
async def rel_cancel(ctx: Context, job: CancelJob) -> int:
    await ctx.transaction(effect, ctx.execution_id, "began", str(job.n), name="began")
    if job.mode == "approval":
        await ctx.approval("never", prompt="Nobody answers this; the task is cancelled")
    else:
        await ctx.sleep(3600.0)
    await ctx.transaction(effect, ctx.execution_id, "not_reached", str(job.n), name="not_reached")
    return job.n


@app.workflow(mcp=True)
async def rel_lease(ctx: Context, job: StepsJob) -> int:
    await ctx.transaction(effect, ctx.execution_id, "l1", str(job.n), name="l1")
    await ctx.transaction(held_effect, ctx.execution_id, "l2", str(job.n), name="l2")
    return job.n
