"""The workflows the reliability suite drives (every process loads `reliability/app.py:app`).

Two kinds of effect, both counted by the verifier:

- transaction effects: one row in `rel_effects`, inserted by a transaction step
  (`ctx.transaction`): the insert commits together with the step's checkpoint, so counting rows
  per (execution_id, step) checks exactly-once. The table has no unique constraint on purpose: a
  duplicate would be visible, not refused.
- plain-step effects: an outbound HTTP call from a plain `ctx.step` to the suite's recorder
  (`REL_RECORDER_URL`, see `reliability/recorder.py`), like a real side effect. Plain steps are
  at-least-once: a call cut off by a kill before its result was recorded runs again.

Every input carries the phase (`phase`) and the plan number (`n`), and every effect row the
phase, so the verifier finds every run and effect of a phase whatever its idempotency key.

- `rel_steps`: transaction, call, transaction, call, transaction; returns {n, total}.
- `rel_timer`: transaction, call, durable sleep, transaction (the replay after the sleep
  passes the recorded call: it must not run again).
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
from urllib.parse import urlsplit

import asyncpg
import orjson
from pydantic import BaseModel

from tether.runtime.context import Context
from tether.runtime.exposure import Exposure
from tether.runtime.registry import App
from tether.runtime.waits import Approved

app = App("reliability")
# Served so the fuzz phase can send it bad plans (none of which may be taken).
app.allow_create_workflow = True

SCHEMA = """
CREATE TABLE IF NOT EXISTS rel_effects (
    id           bigserial   PRIMARY KEY,
    execution_id text        NOT NULL,
    step         text        NOT NULL,
    value        text,
    phase        text        NOT NULL,
    pid          integer     NOT NULL,
    at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS rel_effects_run ON rel_effects (execution_id, step);
"""


class StepsJob(BaseModel):
    n: int
    phase: str = ""


class StepsOut(BaseModel):
    n: int
    total: int


class TimerJob(BaseModel):
    n: int
    phase: str = ""
    sleep_s: float


class ApprovalJob(BaseModel):
    n: int
    phase: str = ""


class ApprovalOut(BaseModel):
    n: int
    ticket: str


class CancelJob(BaseModel):
    n: int
    phase: str = ""
    mode: Literal["approval", "sleep"]


async def effect(
    conn: asyncpg.Connection, execution_id: str, step: str, value: str, phase: str
) -> int:
    """The transaction step: one row that commits with the checkpoint or not at all."""
    row_id: int = await conn.fetchval(
        "INSERT INTO rel_effects (execution_id, step, value, phase, pid)"
        " VALUES ($1, $2, $3, $4, $5) RETURNING id",
        execution_id,
        step,
        value,
        phase,
        os.getpid(),
    )
    return row_id


async def held_effect(
    conn: asyncpg.Connection, execution_id: str, step: str, value: str, phase: str
) -> int:
    """Like `effect`, but keeps the transaction open for REL_HOLD_S seconds after the insert."""
    row_id = await effect(conn, execution_id, step, value, phase)
    hold = float(os.environ.get("REL_HOLD_S", "0") or 0)
    if hold > 0:
        await asyncio.sleep(hold)
    return row_id


async def call_out(execution_id: str, step: str, phase: str) -> int:
    """The plain step's side effect: POST to the recorder; its call id is the step's result.

    A bare HTTP/1.1 request on a fresh loopback connection: no client object, pool or TLS
    context lives on between calls, so the soak measures Tether's memory, not ours."""
    url = urlsplit(os.environ.get("REL_RECORDER_URL", ""))
    if not (url.hostname and url.port):
        raise RuntimeError("REL_RECORDER_URL is not set: no recorder to call")
    body = orjson.dumps({"run": execution_id, "step": step, "phase": phase, "pid": os.getpid()})
    head = (
        f"POST {url.path or '/'} HTTP/1.1\r\nHost: {url.netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    async with asyncio.timeout(30.0):
        reader, writer = await asyncio.open_connection(url.hostname, url.port)
        try:
            writer.write(head.encode("ascii") + body)
            await writer.drain()
            answer = await reader.read()
        finally:
            writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    if b" 200 " not in status_line:
        raise RuntimeError(f"recorder answered {status_line!r}")
    call_id: int = orjson.loads(rest.split(b"\r\n\r\n", 1)[1])["call"]
    return call_id


@app.workflow(expose=Exposure(tool_set=True))
async def rel_steps(ctx: Context, job: StepsJob) -> StepsOut:
    total = 0
    for step, call in (("s1", "c1"), ("s2", "c2"), ("s3", None)):
        await ctx.transaction(effect, ctx.execution_id, step, str(job.n), job.phase, name=step)
        total += job.n
        if call is not None:
            await ctx.step(call_out, ctx.execution_id, call, job.phase, name=call)
    return StepsOut(n=job.n, total=total)


@app.workflow(expose=Exposure(tool_set=True))
async def rel_timer(ctx: Context, job: TimerJob) -> int:
    await ctx.transaction(effect, ctx.execution_id, "before", str(job.n), job.phase, name="before")
    await ctx.step(call_out, ctx.execution_id, "c0", job.phase, name="c0")
    await ctx.sleep(job.sleep_s)
    await ctx.transaction(effect, ctx.execution_id, "after", str(job.n), job.phase, name="after")
    return job.n


@app.workflow(expose=Exposure(tool_set=True))
async def rel_approval(ctx: Context, job: ApprovalJob) -> ApprovalOut:
    await ctx.transaction(effect, ctx.execution_id, "asked", str(job.n), job.phase, name="asked")
    decision = await ctx.approval(
        "go", prompt=f"Approve job {job.n}?", inputs=["ticket"], required=["ticket"]
    )
    ticket = decision.inputs["ticket"] if isinstance(decision, Approved) else "pushed-back"
    await ctx.transaction(
        effect, ctx.execution_id, "answered", str(ticket), job.phase, name="answered"
    )
    return ApprovalOut(n=job.n, ticket=str(ticket))


@app.workflow(expose=Exposure(tool_set=True))
async def rel_cancel(ctx: Context, job: CancelJob) -> int:
    await ctx.transaction(effect, ctx.execution_id, "began", str(job.n), job.phase, name="began")
    if job.mode == "approval":
        await ctx.approval("never", prompt="Nobody answers this; the task is cancelled")
    else:
        await ctx.sleep(3600.0)
    await ctx.transaction(
        effect, ctx.execution_id, "not_reached", str(job.n), job.phase, name="not_reached"
    )
    return job.n


@app.workflow(expose=Exposure(tool_set=True))
async def rel_lease(ctx: Context, job: StepsJob) -> int:
    await ctx.transaction(effect, ctx.execution_id, "l1", str(job.n), job.phase, name="l1")
    await ctx.transaction(held_effect, ctx.execution_id, "l2", str(job.n), job.phase, name="l2")
    return job.n
