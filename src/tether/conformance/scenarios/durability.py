"""Durability of create: a task exists before its `CreateTaskResult` is sent, for every
connection (CHECKLIST item 88)."""

from __future__ import annotations

from tether.conformance.client import Exchange
from tether.conformance.context import LONG_S, Context
from tether.conformance.scenario import FunctionScenario
from tether.conformance.scenarios._common import describe

CHECKS = ("durability:get-immediately",)
ROUNDS = 5


async def run(ctx: Context) -> None:
    check = CHECKS[0]
    slow = await ctx.need("slow_compute", CHECKS)
    if slow is None:
        return
    problems: list[str] = []
    shown: list[Exchange] = []
    fresh = ctx.client.fresh()
    try:
        for n in range(ROUNDS):
            created = await ctx.call_tool(
                slow, "slow_compute", seconds=LONG_S, label=f"durable-{n}"
            )
            if created.task_id is None:
                ctx.skip(
                    check,
                    f"precondition: {slow} created no task ({describe(created.exchange)})",
                    created.exchange,
                )
                return
            # The same connection, then a brand-new one: no instance or connection affinity.
            same = await ctx.get(created.task_id)
            other = await fresh.call("tasks/get", {"taskId": created.task_id})
            ctx.client.exchanges.append(other)
            for label, ex in (("same connection", same), ("new connection", other)):
                if ex.result is None or ex.result.get("taskId") != created.task_id:
                    problems.append(f"round {n}, {label}: {describe(ex)}")
                    shown += [created.exchange, ex]
    finally:
        await fresh.aclose()
    ctx.verdict(
        check, problems[:5], f"{ROUNDS} tasks readable at once on two connections", *shown[:4]
    )


SCENARIO = FunctionScenario("durability", "durability of create", CHECKS, run)
