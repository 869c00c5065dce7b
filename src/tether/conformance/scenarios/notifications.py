"""`subscriptions/listen` for task notifications (CHECKLIST 133-135; the Tasks extension's
status notifications, `spec.URL_TASKS_NOTIFICATIONS`): the ack comes first and lists only
agreed ids, every `notifications/tasks` is the `DetailedTask` `tasks/get` returns (no
`resultType`, the subscription id in `_meta`), and nothing else is sent: no progress, no log
messages, no kinds or tasks that were not asked for.

Push is optional for servers: one that answers the listen with an error or without a stream
skips these checks. The official scenario (`tasks-status-notifications`) is still pending."""

from __future__ import annotations

from typing import Any

from tether.conformance import spec
from tether.conformance.client import Exchange
from tether.conformance.context import Context
from tether.conformance.scenario import FunctionScenario
from tether.conformance.scenarios._common import describe

CHECKS = ("notify:ack-first", "notify:task-view", "notify:nothing-unrequested")
REQUEST_ID = "tether-conformance-listen"


async def run(ctx: Context) -> None:
    slow = await ctx.need("slow_compute", CHECKS)
    if slow is None:
        return
    created = await ctx.call_tool(slow, "slow_compute", seconds=1)
    if created.task_id is None:
        ctx.skip_all(CHECKS, f"precondition: {slow} created no task ({describe(created.exchange)})")
        return
    task_id = created.task_id
    params = {"notifications": {"taskIds": [task_id]}}
    ex = await ctx.client.listen(params, REQUEST_ID, ctx.options.timeout)
    if not ex.is_sse or not ex.messages:
        ctx.skip_all(CHECKS, f"the server does not push task notifications ({describe(ex)})")
        return
    notes = [m for m in ex.messages if "method" in m]
    _ack(ctx, ex, notes, task_id)
    frames = [m for m in notes if m.get("method") == spec.TASK_NOTIFICATION]
    after = await ctx.get(task_id)
    _views(ctx, ex, after, frames, task_id)
    stray = [
        m.get("method")
        for m in notes
        if m.get("method") not in (spec.LISTEN_ACKNOWLEDGED, spec.TASK_NOTIFICATION)
        or (
            m.get("method") == spec.TASK_NOTIFICATION
            and (m.get("params") or {}).get("taskId") != task_id
        )
    ]
    problems = [f"unrequested messages on the stream: {stray}"] if stray else []
    ctx.verdict("notify:nothing-unrequested", problems, "only the ack and task views", ex)


def _ack(ctx: Context, ex: Exchange, notes: list[dict[str, Any]], task_id: str) -> None:
    first = notes[0] if notes else {}
    params = first.get("params") or {}
    problems = []
    if first.get("method") != spec.LISTEN_ACKNOWLEDGED:
        problems.append(f"the first message is {first.get('method')!r}, not the ack")
    elif (params.get("_meta") or {}).get(spec.META_SUBSCRIPTION_ID) != REQUEST_ID:
        problems.append("the ack's _meta subscriptionId is not the listen request's id")
    agreed = (params.get("notifications") or {}).get("taskIds")
    if first.get("method") == spec.LISTEN_ACKNOWLEDGED and (
        not isinstance(agreed, list) or not set(agreed) <= {task_id}
    ):
        problems.append(f"the ack agrees to {agreed!r}, not a subset of the requested ids")
    ctx.verdict("notify:ack-first", problems, "the ack came first with the agreed ids", ex)


def _views(
    ctx: Context, ex: Exchange, after: Exchange, frames: list[dict[str, Any]], task_id: str
) -> None:
    problems = []
    for frame in frames:
        p = frame.get("params") or {}
        if "resultType" in p:
            problems.append("a notifications/tasks carries resultType")
        if (p.get("_meta") or {}).get(spec.META_SUBSCRIPTION_ID) != REQUEST_ID:
            problems.append("a notifications/tasks lacks the subscriptionId _meta")
        missing = [k for k in ("taskId", "status", "createdAt", "lastUpdatedAt") if k not in p]
        if missing:
            problems.append(f"a notifications/tasks lacks {missing}")
    polled = {k: v for k, v in (after.result or {}).items() if k not in ("resultType", "_meta")}
    last = (
        {k: v for k, v in (frames[-1].get("params") or {}).items() if k != "_meta"}
        if frames
        else {}
    )
    if frames and last.get("status") in spec.TERMINAL and last != polled:
        problems.append("the final notifications/tasks differs from tasks/get")
    ctx.verdict("notify:task-view", problems, "every frame is the tasks/get view", ex, after)


SCENARIO = FunctionScenario("notifications", "subscriptions/listen task notifications", CHECKS, run)
