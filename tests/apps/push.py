"""Workflows for the push tests: durable sleeps, a retry backoff, an approval, a chain."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from pydantic import BaseModel

import tether

app = tether.App("push-tests")

#: Tries per key of `flaky` in this process (the server and its worker share it in tests).
TRIES: Counter[str] = Counter()


class Nap(BaseModel):
    seconds: float = 1.0
    naps: int = 1


@app.workflow(expose=tether.Exposure(tool_set=True), retention=timedelta(hours=1))
async def napper(ctx: tether.Context, nap: Nap) -> dict[str, int]:
    """Sleeps durably `naps` times, then finishes."""
    for i in range(nap.naps):
        await ctx.set_details(f"nap {i + 1}/{nap.naps}")
        await ctx.sleep(nap.seconds)
    return {"naps": nap.naps}


class Flaky(BaseModel):
    key: str
    failures: int = 1


def _flaky(key: str, failures: int) -> str:
    TRIES[key] += 1
    if TRIES[key] <= failures:
        raise ConnectionError(f"try {TRIES[key]} of {key} fails")
    return f"ok after {TRIES[key]} tries"


@app.workflow(expose=tether.Exposure(tool_set=True), retention=timedelta(hours=1))
async def flaky(ctx: tether.Context, job: Flaky) -> str:
    """A step that fails `failures` times, retried with a durable backoff."""
    retry = tether.RetryPolicy(max_attempts=job.failures + 1, initial_interval=0.3, backoff=1.0)
    return str(await ctx.step(_flaky, job.key, job.failures, retry=retry))


class Gate(BaseModel):
    title: str = "go"


@app.workflow(expose=tether.Exposure(tool_set=True), retention=timedelta(hours=1))
async def gated(ctx: tether.Context, gate: Gate) -> str:
    """Waits for an approval, then finishes."""
    await ctx.approval("go", prompt=f"Go ahead with {gate.title}?")
    return f"{gate.title}: approved"


class Relay(BaseModel):
    legs: int = 2
    seconds: float = 0.2


@app.workflow(expose=tether.Exposure(tool_set=True), retention=timedelta(hours=1))
async def relay(ctx: tether.Context, leg: Relay) -> str:
    """Sleeps, then continues as new until no legs are left."""
    await ctx.sleep(leg.seconds)
    if leg.legs > 1:
        ctx.continue_as_new(Relay(legs=leg.legs - 1, seconds=leg.seconds))
    return "arrived"
