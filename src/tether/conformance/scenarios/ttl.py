"""TTL: a task past its `ttlMs` is either still served or gone with `-32602`
(CHECKLIST item 107). Runs only when the TTL ends within the run's timeout."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from tether.conformance import spec
from tether.conformance.context import Context
from tether.conformance.scenario import FunctionScenario
from tether.conformance.scenarios._common import describe, error_problems, is_int, timestamp

CHECKS = ("ttl:purged-invalid-params",)
MARGIN_S = 0.2


async def run(ctx: Context) -> None:
    check = CHECKS[0]
    slow = await ctx.need("slow_compute", CHECKS)
    if slow is None:
        return
    created = await ctx.call_tool(slow, "slow_compute", seconds=1, label="ttl")
    if created.task_id is None:
        ctx.skip(check, f"precondition: {slow} created no task ({describe(created.exchange)})")
        return
    polled = await ctx.poll(created.task_id, spec.TERMINAL)
    task = polled.task or {}
    ttl, born = task.get("ttlMs"), timestamp(task.get("createdAt"))
    if not polled.reached or not is_int(ttl) or born is None:
        ctx.skip(check, f"the ended task has no usable ttlMs/createdAt ({ttl!r})")
        return
    if born.tzinfo is None:
        born = born.replace(tzinfo=UTC)
    wait = (
        born + timedelta(milliseconds=float(ttl or 0)) - datetime.now(UTC)
    ).total_seconds() + MARGIN_S
    if wait > ctx.options.timeout:
        ctx.skip(
            check, f"ttlMs {ttl} ends in {wait:.0f}s, beyond the {ctx.options.timeout:g}s budget"
        )
        return
    await asyncio.sleep(max(wait, 0))
    ex = await ctx.get(created.task_id)
    if ex.result is not None and ex.result.get("taskId") == created.task_id:
        ctx.passed(check, "still served after its ttlMs (the server may keep it)", ex)
    else:
        ctx.verdict(
            check, error_problems(ex, spec.INVALID_PARAMS), "gone with -32602 after its ttlMs", ex
        )


SCENARIO = FunctionScenario("ttl", "task TTL", CHECKS, run)
