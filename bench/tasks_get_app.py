"""The Tether App of bench/tasks_get.py: one run that parks, one that completes at once.

Both workflows are served as MCP tools (``expose=Exposure(tool=True)``), so a ``tools/call``
that declares the Tasks extension returns a task, as FastMCP's ``task=True`` tools do on the
other side (bench/tasks_get_ceilings.py). ``parked`` waits for a signal that never comes, so
its task stays ``working`` (the benchmark's client declares no elicitation); ``quick`` returns
a small object, so its task is ``completed`` with the result inlined.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel

from tether import App, Context, Exposure

PARKED = "parked"
QUICK = "quick"
SIGNAL = "go"

app = App("tasks_get_bench")


class ParkInput(BaseModel):
    label: str = "bench"


class QuickInput(BaseModel):
    value: int = 7


@app.workflow(name=PARKED, expose=Exposure(tool=True), retention=timedelta(days=1))
async def parked(ctx: Context, job: ParkInput) -> dict[str, str]:
    """Wait for signal 'go', then echo it."""
    answer = await ctx.wait_for_signal(SIGNAL, prompt=f"release {job.label}")
    return {"label": job.label, "answer": str(answer)}


@app.workflow(name=QUICK, expose=Exposure(tool=True), retention=timedelta(days=1))
async def quick(ctx: Context, job: QuickInput) -> dict[str, int]:
    """Return the value at once."""
    return {"value": job.value}
