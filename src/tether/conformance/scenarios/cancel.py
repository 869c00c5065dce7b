"""`tasks/cancel`: the acknowledgement, cooperative ending, idempotence, and
`notifications/cancelled` not touching tasks (CHECKLIST J)."""

from __future__ import annotations

import asyncio

from tether.conformance import spec
from tether.conformance.client import make_meta
from tether.conformance.context import FIXTURE_ARGS, LONG_S, Context
from tether.conformance.scenario import FunctionScenario
from tether.conformance.scenarios._common import ack_problems, describe, error_problems

CHECKS = (
    "cancel:notification-ignored",
    "cancel:ack",
    "cancel:reaches-terminal",
    "cancel:stays-cancelled",
    "cancel:completed-idempotent",
    "cancel:unknown-task",
)
RUNNING_CHECKS = CHECKS[:4]
STABLE_POLLS = 5


async def run(ctx: Context) -> None:
    ex = await ctx.client.call("tasks/cancel", {"taskId": "tk-conformance-unknown"})
    ctx.verdict("cancel:unknown-task", error_problems(ex, spec.INVALID_PARAMS), "-32602", ex)
    slow = await ctx.need("slow_compute", CHECKS[:5])
    if slow is None:
        return
    await asyncio.gather(_running(ctx, slow), _completed(ctx, slow))


async def _running(ctx: Context, slow: str) -> None:
    c = ctx.client
    rid = f"tether-conformance-create-{c.next_id()}"
    args = {**FIXTURE_ARGS["slow_compute"], "seconds": LONG_S}
    created = await c.call("tools/call", {"name": slow, "arguments": args}, request_id=rid)
    task_id = (created.result or {}).get("taskId")
    if (created.result or {}).get("resultType") != "task" or not isinstance(task_id, str):
        ctx.skip_all(RUNNING_CHECKS, f"precondition: {slow} created no task ({describe(created)})")
        return

    note = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": rid, "reason": "conformance", "_meta": make_meta()},
    }
    sent = await c.post(note, c.headers("notifications/cancelled"))
    after = await ctx.get(task_id)
    problems = []
    if sent.status != 202 and not (sent.status is not None and 400 <= sent.status < 500):
        problems.append(f"the notification got {describe(sent)}")
    if (after.result or {}).get("status") != "working":
        problems.append(f"the task is now {describe(after)}")
    ctx.verdict("cancel:notification-ignored", problems, "the task still runs", sent, after)

    ack = await c.call("tasks/cancel", {"taskId": task_id})
    ctx.verdict("cancel:ack", ack_problems(ack), "acked with an empty result", ack)

    polled = await ctx.poll(task_id, spec.TERMINAL)
    statuses = [t.get("status") for t in polled.seen]
    problems = (
        [] if polled.reached else [f"not terminal after {ctx.options.timeout:g}s: {statuses[-3:]}"]
    )
    shown = [polled.last] if polled.last else []
    final = statuses[-1] if statuses else None
    again = [await ctx.get(task_id) for _ in range(STABLE_POLLS)] if polled.reached else []
    later = [(ex.result or {}).get("status") for ex in again]
    if any(s != final for s in later):
        problems.append(f"after {final!r} the task went {later}")
    ctx.verdict("cancel:reaches-terminal", problems, f"ended {final!r} and stayed", *shown)
    if final != "cancelled":
        ctx.skip("cancel:stays-cancelled", f"the task ended {final!r}, not cancelled", *shown)
        return
    moved = [s for s in later if s != "cancelled"]
    ctx.verdict(
        "cancel:stays-cancelled",
        [f"then {moved}"] if moved else [],
        "cancelled on every poll",
        *again[:1],
    )


async def _completed(ctx: Context, slow: str) -> None:
    check = "cancel:completed-idempotent"
    created = await ctx.call_tool(slow, "slow_compute", seconds=1, label="cancel-after-end")
    if created.task_id is None:
        ctx.skip(check, f"precondition: {slow} created no task ({describe(created.exchange)})")
        return
    polled = await ctx.poll(created.task_id, spec.TERMINAL)
    done = polled.task or {}
    if done.get("status") != "completed":
        ctx.skip(check, f"precondition: the task ended {done.get('status')!r}, not completed")
        return
    ack = await ctx.client.call("tasks/cancel", {"taskId": created.task_id})
    after = await ctx.get(created.task_id)
    problems = ack_problems(ack)
    view = after.result or {}
    if (view.get("status"), view.get("result")) != ("completed", done.get("result")):
        problems.append(f"afterwards: {describe(after)}")
    ctx.verdict(check, problems, "acked; still completed with its result", ack, after)


SCENARIO = FunctionScenario("cancel", "tasks/cancel", CHECKS, run)
