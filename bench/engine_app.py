"""The Tether App of bench/engine.py: the same 3-step workflow as the DBOS side (dbos_side.py).

Three durable steps each add 1 to an integer and the workflow returns their sum. The step is
an ``async`` function: a Tether workflow is a coroutine, so an async step runs inline in the
workflow like a DBOS step runs inline in its workflow thread (a sync step would add a thread
hop per step that the DBOS side does not pay).
"""

from __future__ import annotations

from tether import App, Context

WORKFLOW_NAME = "bench_three_steps"
STEP_NAME = "bench_add_one"

app = App("tether_bench")


async def add_one(value: int) -> int:
    return value + 1


@app.workflow(name=WORKFLOW_NAME)
async def three_steps(ctx: Context, value: int) -> int:
    first: int = await ctx.step(add_one, value, name=STEP_NAME)
    second: int = await ctx.step(add_one, first, name=STEP_NAME)
    third: int = await ctx.step(add_one, second, name=STEP_NAME)
    return first + second + third
