"""`tasks/update`: acknowledgements, keys, partial answers, capabilities that govern input
(CHECKLIST I)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from tether.conformance import spec
from tether.conformance.client import Exchange
from tether.conformance.context import LONG_S, Context, answer_for
from tether.conformance.scenario import FunctionScenario
from tether.conformance.scenarios._common import ack_problems, describe, error_problems

CHECKS = (
    "update:ack",
    "update:ack-no-task-fields",
    "update:key-consumed",
    "update:unknown-key-ignored",
    "update:resend-no-effect",
    "update:empty-responses",
    "update:responses-required",
    "update:not-waiting-ignored",
    "update:decline-refused",
    "update:partial-answer",
    "update:keys-unique",
    "update:answer-reached-task",
    "update:unknown-task",
    "update:no-elicitation-without-cap",
    "update:no-url-mode",
)
CONFIRM_CHECKS = CHECKS[:7]
MULTI_CHECKS = CHECKS[9:12]


class Keys:
    """Every input request seen per task: a key must never name two requests (item 116)."""

    def __init__(self) -> None:
        self.requests: dict[str, Any] = {}
        self.problems: list[str] = []
        self.url_mode: list[str] = []

    def see(self, task: Mapping[str, Any] | None) -> dict[str, Any]:
        requests = (task or {}).get("inputRequests")
        if not isinstance(requests, dict):
            return {}
        for key, request in requests.items():
            if key in self.requests and self.requests[key] != request:
                self.problems.append(f"key {key!r} named two different requests")
            self.requests.setdefault(key, request)
            params = request.get("params") if isinstance(request, dict) else None
            if isinstance(params, dict) and params.get("mode") == "url":
                self.url_mode.append(key)
        return requests


async def update(ctx: Context, task_id: str, responses: Any, **kw: Any) -> Exchange:
    params = (
        {"taskId": task_id}
        if responses is None
        else {"taskId": task_id, "inputResponses": responses}
    )
    return await ctx.client.call("tasks/update", params, **kw)


async def waiting(
    ctx: Context, task_id: str, keys: Keys, at_least: int = 1
) -> dict[str, Any] | None:
    """Poll until the task lists `at_least` input requests; None if it never does."""
    polled = await ctx.poll(
        task_id,
        lambda t: len(keys.see(t)) >= at_least or t.get("status") in spec.TERMINAL,
    )
    task = polled.task
    return task if task is not None and len(keys.see(task)) >= at_least else None


async def run(ctx: Context) -> None:
    keys = Keys()
    ex = await update(ctx, "tk-conformance-unknown", {})
    ctx.verdict("update:unknown-task", error_problems(ex, spec.INVALID_PARAMS), "-32602", ex)
    confirm = await ctx.need(
        "confirm_delete",
        (*CONFIRM_CHECKS, "update:decline-refused", "update:no-elicitation-without-cap"),
    )
    multi = await ctx.need("multi_input", MULTI_CHECKS)
    jobs = []
    if confirm is not None:
        jobs += [
            _confirm(ctx, confirm, keys),
            _decline(ctx, confirm),
            _no_elicitation(ctx, confirm),
        ]
    if multi is not None:
        jobs.append(_multi(ctx, multi, keys))
    jobs.append(_not_waiting(ctx))
    await asyncio.gather(*jobs)
    if keys.requests:
        urls = [f"url-mode requests: {keys.url_mode}"] if keys.url_mode else []
        ctx.verdict("update:no-url-mode", urls, "form mode only", requests=len(keys.requests))
        ctx.verdict("update:keys-unique", keys.problems[:3], "every key names one request")
    else:
        ctx.skip_all(
            ["update:no-url-mode", "update:keys-unique"], "precondition: no input request was seen"
        )


async def _confirm(ctx: Context, tool: str, keys: Keys) -> None:
    created = await ctx.call_tool(tool, "confirm_delete")
    task = await waiting(ctx, created.task_id, keys) if created.task_id else None
    if created.task_id is None or task is None:
        ctx.skip_all(
            CONFIRM_CHECKS,
            f"precondition: {tool} never asked for input ({describe(created.exchange)})",
        )
        return
    tid = created.task_id
    requests = keys.see(task)
    unknown = {"tether-conformance-unknown-key": {"action": "accept", "content": {"confirm": True}}}
    ex = await update(ctx, tid, unknown)
    after = await ctx.get(tid)
    problems = ack_problems(ex)
    if set(keys.see(after.result)) != set(requests):
        problems.append(
            f"the task now lists {sorted(keys.see(after.result))}, not {sorted(requests)}"
        )
    ctx.verdict("update:unknown-key-ignored", problems, "acked; the task keeps its keys", ex, after)

    ex = await update(ctx, tid, {})
    ctx.verdict("update:empty-responses", ack_problems(ex), "acked", ex)
    ex = await update(ctx, tid, None)
    ctx.verdict("update:responses-required", error_problems(ex, spec.INVALID_PARAMS), "-32602", ex)

    answers = {k: answer_for(r, f"conformance-{n}") for n, (k, r) in enumerate(requests.items())}
    ex = await update(ctx, tid, answers)
    ctx.verdict("update:ack", ack_problems(ex), "acked", ex)
    fields = sorted(spec.TASK_FIELDS & set(ex.result or {}))
    ctx.verdict(
        "update:ack-no-task-fields",
        [f"the ack has {fields}"] if fields else [],
        "no task fields",
        ex,
    )

    final = await ctx.poll(
        tid, lambda t: bool(set(keys.see(t)) & set(answers)) or t.get("status") in spec.TERMINAL
    )
    back = [t.get("status") for t in final.seen if set(keys.see(t)) & set(answers)]
    problems = [f"an answered key is listed again ({back[0]})"] if back else []
    ended = (final.task or {}).get("status") in spec.TERMINAL
    if not back and not ended:
        problems.append(f"the task did not move on (last: {(final.task or {}).get('status')!r})")
    shown = [final.last] if final.last else []
    ctx.verdict(
        "update:key-consumed", problems, "the answered key is gone and the task ended", *shown
    )
    if not ended or final.task is None:
        ctx.skip("update:resend-no-effect", "precondition: the task did not end")
        return
    ex = await update(ctx, tid, answers)
    again = await ctx.get(tid)
    problems = ack_problems(ex)
    if _ending(again.result) != _ending(final.task):
        problems.append(f"the ended task changed: {describe(again)}")
    ctx.verdict("update:resend-no-effect", problems, "acked, nothing changed", ex, again)


def _ending(task: Mapping[str, Any] | None) -> tuple[Any, ...]:
    t = task or {}
    return (t.get("status"), t.get("result"), t.get("error"))


async def _decline(ctx: Context, tool: str) -> None:
    check = "update:decline-refused"
    keys = Keys()
    created = await ctx.call_tool(tool, "confirm_delete")
    task = await waiting(ctx, created.task_id, keys) if created.task_id else None
    if created.task_id is None or task is None:
        ctx.skip(check, f"precondition: {tool} never asked for input")
        return
    key = next(iter(keys.see(task)))
    ex = await update(ctx, created.task_id, {key: {"action": "decline"}})
    after = await ctx.get(created.task_id)
    problems = error_problems(ex, spec.INVALID_PARAMS)
    status = (after.result or {}).get("status")
    if status != "input_required" or key not in keys.see(after.result):
        problems.append(
            f"afterwards the task is {status!r} and lists {sorted(keys.see(after.result))}"
        )
    ctx.verdict(check, problems, "-32602; the key stays open", ex, after)


async def _multi(ctx: Context, tool: str, keys: Keys) -> None:
    created = await ctx.call_tool(tool, "multi_input")
    task = await waiting(ctx, created.task_id, keys, at_least=2) if created.task_id else None
    if created.task_id is None or task is None:
        ctx.skip_all(
            MULTI_CHECKS,
            f"precondition: {tool} never asked for two inputs ({describe(created.exchange)})",
        )
        return
    tid = created.task_id
    (first, r1), (second, r2) = list(keys.see(task).items())[:2]
    a1, a2 = answer_for(r1, "conformance-first"), answer_for(r2, "conformance-second")
    ex = await update(ctx, tid, {first: a1})
    polled = await ctx.poll(
        tid, lambda t: first not in keys.see(t) and t.get("status") != "working"
    )
    t = polled.task or {}
    problems = ack_problems(ex)
    if t.get("status") != "input_required" or set(keys.see(t)) != {second}:
        problems.append(
            f"after one answer the task is {t.get('status')!r} listing {sorted(keys.see(t))}"
        )
    shown = [ex] + ([polled.last] if polled.last else [])
    ctx.verdict("update:partial-answer", problems, "only the unanswered key is left", *shown)

    ex = await update(ctx, tid, {second: a2})
    final = await ctx.poll(tid, spec.TERMINAL)
    for view in final.seen:
        keys.see(view)
    if {first, second} & set(keys.see(final.task)):
        keys.problems.append("an answered key came back")
    result = json.dumps((final.task or {}).get("result"))
    missing = [
        v
        for v in ("conformance-first", "conformance-second")
        if v in json.dumps([a1, a2]) and v not in result
    ]
    problems = (
        []
        if (final.task or {}).get("status") == "completed"
        else [f"ended {(final.task or {}).get('status')!r}"]
    )
    problems += [f"the result does not show {missing}"] if missing else []
    ctx.verdict(
        "update:answer-reached-task",
        problems,
        "the result shows both answers",
        ex,
        *([final.last] if final.last else []),
    )


async def _not_waiting(ctx: Context) -> None:
    check = "update:not-waiting-ignored"
    slow = await ctx.need("slow_compute", [check])
    if slow is None:
        return
    created = await ctx.call_tool(slow, "slow_compute", seconds=LONG_S)
    if created.task_id is None:
        ctx.skip(check, f"precondition: {slow} created no task")
        return
    late = {"tether-conformance-k": {"action": "accept", "content": {"x": "y"}}}
    ex = await update(ctx, created.task_id, late)
    after = await ctx.get(created.task_id)
    problems = ack_problems(ex)
    if (after.result or {}).get("status") != "working":
        problems.append(f"the task is now {describe(after)}")
    ctx.verdict(check, problems, "acked; still working", ex, after)


async def _no_elicitation(ctx: Context, tool: str) -> None:
    check = "update:no-elicitation-without-cap"
    caps = spec.CAPS_TASKS_ONLY
    created = await ctx.call_tool(tool, "confirm_delete", caps=caps)
    if created.task_id is None:
        ok = created.exchange.error is not None
        ctx.verdict(
            check,
            [] if ok else [describe(created.exchange)],
            "refused without a task",
            created.exchange,
        )
        return
    polled = await ctx.poll(
        created.task_id, lambda t: False, caps=caps, timeout=ctx.options.observe_s
    )
    asked = [t.get("status") for t in polled.seen if _elicits(t.get("inputRequests"))]
    problems = [f"an elicitation/create request was shown ({asked[0]})"] if asked else []
    shown = [polled.last] if polled.last else []
    ctx.verdict(
        check,
        problems,
        f"no elicitation request in {ctx.options.observe_s:g}s of polling",
        created.exchange,
        *shown,
    )


def _elicits(requests: Any) -> bool:
    if not isinstance(requests, dict):
        return False
    return any(
        isinstance(r, dict) and r.get("method") == "elicitation/create" for r in requests.values()
    )


SCENARIO = FunctionScenario("update", "tasks/update keys and partial answers", CHECKS, run)
