"""Workflows for bench/push.py: a run parked on an approval (its answer is the change the
subscribers hear) and a run asleep for an hour (what watchers watch)."""

from __future__ import annotations

from datetime import timedelta

import tether

app = tether.App("bench-push")


@app.workflow(expose=tether.Exposure(tool_set=True), retention=timedelta(hours=1))
async def parked(ctx: tether.Context, body: dict[str, object]) -> str:
    await ctx.approval("go", prompt="go?")
    return "done"


@app.workflow(expose=tether.Exposure(tool_set=True), retention=timedelta(hours=1))
async def sleeper(ctx: tether.Context, body: dict[str, object]) -> str:
    await ctx.sleep(3600)
    return "woke"
